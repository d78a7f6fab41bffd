#!/usr/bin/env python3
"""PyTorch baseline for the demo: the same ResNet-20 recipe on Fashion-MNIST (read straight from
Debian's idx files), single process with N threads. Prints images/s and val accuracy per epoch,
to compare scaletrain's throughput and time to accuracy against (docs/performance.md).

  /usr/bin/python3 tools/torch_baseline.py --threads 2 --epochs 5 --batch-size 128 --lr 0.2
"""
import argparse
import gzip
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_blas import require_fast_blas  # noqa: E402
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
from torch_reference import ResNet20  # noqa: E402


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--warmup-epochs", type=float, default=0.2)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--flip", action="store_true", default=True)
    p.add_argument("--max-steps", type=int, default=0, help="stop after N steps (throughput only)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    require_fast_blas("torch_baseline")
    torch.manual_seed(1)
    xtr = read_idx(f"{a.source}/train-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    ytr = read_idx(f"{a.source}/train-labels-idx1-ubyte.gz").astype(np.int64)
    xva = read_idx(f"{a.source}/t10k-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    yva = read_idx(f"{a.source}/t10k-labels-idx1-ubyte.gz").astype(np.int64)
    mean, std = xtr.mean(), xtr.std()
    xtr = torch.from_numpy((xtr - mean) / std).unsqueeze(1)
    xva = torch.from_numpy((xva - mean) / std).unsqueeze(1)
    ytr, yva = torch.from_numpy(ytr), torch.from_numpy(yva)
    model = ResNet20(1, 10)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=a.weight_decay)
    steps_per_epoch = len(xtr) // a.batch_size
    total = steps_per_epoch * a.epochs
    warm = int(a.warmup_epochs * steps_per_epoch)
    step, t0 = 0, time.time()
    train_time = 0.0
    for epoch in range(a.epochs):
        model.train()
        perm = torch.randperm(len(xtr))
        te = time.time()
        for s in range(steps_per_epoch):
            idx = perm[s * a.batch_size:(s + 1) * a.batch_size]
            x, y = xtr[idx], ytr[idx]
            if a.flip:
                m = torch.rand(len(x)) < 0.5
                x[m] = x[m].flip(3)
            lr = a.lr * (step + 1) / warm if step < warm else \
                0.5 * a.lr * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))
            for g in opt.param_groups:
                g["lr"] = lr
            loss = F.cross_entropy(model(x), y, label_smoothing=a.label_smoothing)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % 50 == 0:
                print(f"epoch {epoch + 1} step {s + 1} loss {loss.item():.4f} "
                      f"{step * a.batch_size / (train_time + time.time() - te):.1f} images/s", flush=True)
            if a.max_steps and step >= a.max_steps:
                print(f"throughput {step * a.batch_size / (train_time + time.time() - te):.1f} images/s "
                      f"({a.threads} threads, batch {a.batch_size})")
                return
        train_time += time.time() - te
        model.eval()
        with torch.no_grad():
            correct = sum((model(xva[i:i + 500]).argmax(1) == yva[i:i + 500]).sum().item()
                          for i in range(0, len(xva), 500))
        print(f"epoch {epoch + 1}: val top-1 {correct / len(xva):.4f}, train {len(xtr) * (epoch + 1) / train_time:.1f} "
              f"images/s, elapsed {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
