#!/usr/bin/env python3
"""PyTorch baseline for the ImageNet CNNs' CPU training throughput (tools/bench_cnn.sh,
docs/performance.md, issue 24): one process with N threads trains one of scaletrain's image models
on a synthetic batch at the model's input size, as `scaletrain train --model NAME` trains it:

- the model: torchvision 0.14's alexnet, googlenet, inception_v3, resnet50, or the Caffe replicas
  of tests/python/torch_reference.py (CaffeAlexNet 227x227, CaffeGoogLeNet), via its make_model
  (the same one the cross-checks compare scaletrain with), 1000 classes, in train mode (dropout,
  batch-norm statistics, the auxiliary heads run);
- the loss: cross-entropy of the main head plus --aux-loss-weight times each auxiliary head's
  (scaletrain's defaults: googlenet 0.3 per head, inception_v3 0.4, googlenet-caffe 0.3;
  the others have none), no label smoothing (scaletrain's default);
- torch.optim.SGD with momentum 0.9 and weight decay 5e-5 (scaletrain's defaults), a constant lr.

The batch (uniform random pixels, normalised, random labels) is made once before the clock, so
data loading is not timed (scaletrain's data wait is ~0 with --no-augment, report.json step_split).
Each step (zero_grad, forward, loss, backward, optimizer step) is timed on its own; the figure is
the median over the steps after the first (report.json's step_time leaves out the first step and
its p50 is what tools/bench_cnn.sh compares with). Prints one line
  step_ms MEDIAN mean MEAN min MIN max MAX steps K images_per_s B/MEDIAN

  /usr/bin/python3 tools/torch_cnn_baseline.py --model googlenet --threads 2 --batch-size 8 --steps 6
"""
import argparse
import os
import statistics
import sys
import time
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_blas import require_fast_blas  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from torch_reference import make_model  # noqa: E402

# The models' input sizes and default --aux-loss-weight (src/models/registry.cpp).
INPUT_SIZE = {"resnet50": 224, "alexnet": 224, "googlenet": 224, "inception_v3": 299, "alexnet-caffe": 227,
              "googlenet-caffe": 224}
DEFAULT_AUX_WEIGHT = {"googlenet": 0.3, "inception_v3": 0.4, "googlenet-caffe": 0.3}


def outputs(out):
    """(logits, [auxiliary logits]) of a training forward, whatever the model returns."""
    if isinstance(out, torch.Tensor):
        return out, []
    if hasattr(out, "aux_logits2"):  # torchvision's GoogLeNet
        return out.logits, [out.aux_logits1, out.aux_logits2]
    if hasattr(out, "aux_logits"):  # torchvision's Inception-v3
        return out.logits, [out.aux_logits]
    return out[0], list(out[1:])  # CaffeGoogLeNet: (logits, loss1, loss2)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, choices=sorted(INPUT_SIZE))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=6, help="steps in all; the first is left out of the figure")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=5e-5)
    p.add_argument("--aux-loss-weight", type=float, default=None)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--show-config", action="store_true", help="print torch.__config__.show() first")
    a = p.parse_args()
    if a.steps < 2:
        sys.exit("torch_cnn_baseline: --steps must be at least 2 (the first is warm-up)")

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.show_config:
        print(torch.__config__.show())
    require_fast_blas("torch_cnn_baseline")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")

    with warnings.catch_warnings():  # torchvision's "init_weights will change" notice
        warnings.simplefilter("ignore")
        model = make_model(a.model, 3, a.classes)
    model.train()
    weight = a.aux_loss_weight if a.aux_loss_weight is not None else DEFAULT_AUX_WEIGHT.get(a.model, 0.0)
    size = INPUT_SIZE[a.model]
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(a.batch_size, 3, size, size, generator=g) - 0.5) / 0.25
    y = torch.randint(0, a.classes, (a.batch_size,), generator=g)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay)

    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits, aux = outputs(model(x))
        loss = F.cross_entropy(logits, y)
        for head in aux:
            loss = loss + weight * F.cross_entropy(head, y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    if not torch.isfinite(loss):
        print("warning: the loss is not finite")
    timed = times[1:]
    med = statistics.median(timed)
    print(f"model {a.model} {size}x{size} batch {a.batch_size} aux weight {weight} heads {len(aux)} "
          f"loss {loss.item():.4f}")
    print(f"step_ms {med * 1e3:.1f} mean {statistics.mean(timed) * 1e3:.1f} min {min(timed) * 1e3:.1f} "
          f"max {max(timed) * 1e3:.1f} steps {len(timed)} images_per_s {a.batch_size / med:.2f}")


if __name__ == "__main__":
    main()
