"""Cross-check of one image classifier against PyTorch 1.13, as test_torch_crosscheck.py does for
ResNet-20: the same weights (through the checkpoint format) give the same logits in evaluation,
and one SGD step on 1 and 2 ranks from the same weights and batch gives the same weights and
batch-norm running statistics, with the auxiliary heads' losses added (--aux-loss-weight) and
dropout drawing scaletrain's masks (the torch side applies the same counter-based masks: see
torch_reference.PhiloxDropout). Registered once per model (torch.crosscheck_<model>):

  crosscheck_cnn.py MODEL SIZE CLASSES [--aux-loss-weight W] [--batches 1x4,2x2] [--logits-only]
                    [--update-l2 TOL]

Exits non-zero on any mismatch."""
import argparse
import copy
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from torch_reference import (ST_BIN, ST_TMP, compare, install_philox_dropout, make_model, normalise,  # noqa: E402
                             read_checkpoint, run, state_items, write_checkpoint, write_dataset)
import h5py  # noqa: E402

LR, MOMENTUM, WD, SMOOTH, SEED = 0.01, 0.9, 1e-3, 0.1, 7
# The models' default --aux-loss-weight (the registry's).
DEFAULT_AUX_WEIGHT = {"googlenet": 0.3, "inception_v3": 0.4, "googlenet-caffe": 0.3}
MEAN, STD = [0.4, 0.5, 0.6], [0.2, 0.25, 0.3]


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("size", type=int)
    p.add_argument("classes", type=int)
    p.add_argument("--aux-loss-weight", type=float, default=None)
    p.add_argument("--batches", default="1x4,2x2", help="RANKSxBATCH pairs of the SGD steps")
    p.add_argument("--logits-only", action="store_true")
    p.add_argument("--update-l2", type=float, default=None,
                   help="judge the step by the relative L2 error of the whole update against PyTorch's "
                        "(tensors beyond the elementwise tolerance are printed, not failed)")
    p.add_argument("--val", type=int, default=4)
    return p.parse_args()


def training_input(model_name, images):
    """What the trainer feeds the model: the dataset's normalisation, or for the Caffe models
    (--preprocess caffe, their default) BGR pixels on 0..255 less Caffe's channel means."""
    if model_name.endswith("-caffe"):
        bgr = images[..., ::-1].astype(np.float32) - np.asarray([104.0, 117.0, 123.0], np.float32)
        return torch.from_numpy(np.ascontiguousarray(bgr.transpose(0, 3, 1, 2)))
    return normalise(images, MEAN, STD)


def relative_update_error(a, b, before):
    num = den = 0.0
    for k in sorted(set(a) & set(b)):
        if "running" in k:
            continue
        da, db = a[k].double() - before[k].double(), b[k].double() - before[k].double()
        num, den = num + (da - db).pow(2).sum().item(), den + db.pow(2).sum().item()
    return (num / den) ** 0.5


def check_update_l2(failures, what, ours, theirs, before, tol, exact):
    """The whole update (every parameter) against the float64 step's: ||(ours - w0) - (exact -
    w0)|| / ||exact - w0|| <= tol, printed beside PyTorch's float32 step's own error. For networks
    whose step turns on max-pool near-ties and ReLU inputs within rounding of 0 (docs/models.md),
    where no elementwise tolerance holds for PyTorch's float32 step either; a wrong mask, gradient
    or graph is an error of order 1. tools/near_tie_attribution.py shows, by hand, that once the
    float64 step follows our few near-tie decisions our step is closer to it than PyTorch's."""
    rel = relative_update_error(ours, exact, before)
    print(f"{what}: relative L2 error of the whole update against the float64 step: ours {rel:.3g}, PyTorch "
          f"float32 {relative_update_error(theirs, exact, before):.3g}, ours against PyTorch float32 "
          f"{relative_update_error(ours, theirs, before):.3g} (tolerance {tol:g})")
    if not rel <= tol:
        failures.append(f"{what}: the update differs from the float64 step by {rel:.3g} (relative L2), more than {tol:g}")


def within(got, want, atol, rtol):
    return bool(((got.double() - want.double()).abs() <= atol + rtol * want.double().abs()).all())


def compare_to_exact(failures, what, ours, torch32, torch64, before):
    """Both steps against the float64 one, tensor by tensor (max |difference|): ours may be no
    further from it than 4 times PyTorch's float32 step is, or than 1% of the largest change the
    float64 step makes to the tensor (the gradient to 1%), or than ResNet-20's tolerance."""
    ours, torch32, torch64 = ours.double(), torch32.double(), torch64.double()
    err = (ours - torch64).abs().max().item()
    torch_err = (torch32 - torch64).abs().max().item()
    change = (torch64 - before.double()).abs().max().item() if before is not None else 0.0
    base = (2e-5 + 1e-4 * torch64.abs()).min().item()
    allowed = max(base, 4 * torch_err, 0.01 * change)
    print(f"{what}: against float64: max |diff| {err:.3g}, PyTorch float32's {torch_err:.3g}, the step's "
          f"largest change {change:.3g}, worst/tolerance {err / allowed:.3f}")
    if err > allowed:
        failures.append(f"{what}: {err:.3g} from the float64 step (PyTorch's float32 step: {torch_err:.3g}; the "
                        f"step's largest change {change:.3g})")


def prepare_weights(model, x):
    """Weights that keep the activations' scale through the depth, so that every layer's gradient
    is exercised: Kaiming-normal convolutions and linear layers where there is no batch norm (the
    Caffe models: PyTorch's default init shrinks activations layer by layer), and batch norm with
    non-trivial affine parameters and running statistics measured on x (random statistics would
    blow an evaluation forward of a deep network up or down)."""
    has_bn = any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.momentum = None  # a cumulative average over the calibration batch
                m.reset_running_stats()
            elif not has_bn and isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                torch.nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        if has_bn:
            heads = {n: getattr(model, n) for n in ("aux1", "aux2", "AuxLogits") if getattr(model, n, None) is not None}
            for n in heads:  # Inception-v3's head cannot run below 299x299; evaluation does not need them
                setattr(model, n, None)
            model.train()
            model(x)
            for n, head in heads.items():
                setattr(model, n, head)
            for m in model.modules():
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.momentum = 0.1
    model.eval()


def outputs(model, x, aux_weight):
    """(logits, [aux logits in scaletrain's head order]) of a training forward."""
    out = model(x)
    if isinstance(out, torch.Tensor):
        return out, []
    if hasattr(out, "aux_logits2"):  # torchvision's GoogLeNet: (logits, aux2's, aux1's) by field name
        return out.logits, [out.aux_logits1, out.aux_logits2]
    if hasattr(out, "aux_logits"):  # Inception-v3
        return out.logits, [out.aux_logits]
    return out[0], list(out[1:])  # the Caffe GoogLeNet replica: (logits, loss1, loss2)


def heads_off(model):
    """Weight 0: the auxiliary heads neither run nor train (their parameters get no gradient, so
    torch.optim leaves them as they are, as scaletrain freezes them)."""
    if hasattr(model, "aux_logits") and model.aux_logits:
        model.aux_logits = False
        for name in ("aux1", "aux2", "AuxLogits"):
            if getattr(model, name, None) is not None:
                model._modules[name + "_off"] = model._modules.pop(name)
                setattr(model, name, None)


def main():
    a = parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    root = os.path.join(ST_TMP, f"crosscheck_{a.model}")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    pairs = [tuple(int(v) for v in b.split("x")) for b in a.batches.split(",")] if not a.logits_only else []
    n_train = max([r * b for r, b in pairs] + [1])
    rng = np.random.default_rng(0)
    images = {"train": rng.integers(0, 256, (n_train, a.size, a.size, 3), dtype=np.uint8),
              "val": rng.integers(0, 256, (a.val, a.size, a.size, 3), dtype=np.uint8)}
    labels = {s: rng.integers(0, a.classes, len(v)).astype(np.int32) for s, v in images.items()}
    data = os.path.join(root, "data")
    write_dataset(data, images, labels, a.classes, MEAN, STD, shards=1)

    model = make_model(a.model, 3, a.classes)
    prepare_weights(model, normalise(images["val"], MEAN, STD))
    init = os.path.join(root, "init.h5")
    write_checkpoint(init, a.model, model)
    failures = []

    # 1. Logits: predict on normalised inputs, in evaluation mode (no dropout, main head only).
    x_val = normalise(images["val"], MEAN, STD)
    with h5py.File(os.path.join(root, "in.h5"), "w") as f:
        f.create_dataset("inputs", data=x_val.numpy())
    run([f"{ST_BIN}/scaletrain", "predict", "--model", a.model, "--checkpoint", init, "--input",
         os.path.join(root, "in.h5"), "--output", os.path.join(root, "out.h5"), "--threads", "1"])
    with h5py.File(os.path.join(root, "out.h5"), "r") as f:
        ours = torch.from_numpy(np.array(f["logits"]))
    model.eval()
    with torch.no_grad():
        theirs = model(x_val)
    if within(ours, theirs, 1e-4, 1e-4):
        compare(failures, "predict logits", ours, theirs, 1e-4, 1e-4)
    else:
        with torch.no_grad():
            exact = copy.deepcopy(model).double()(x_val.double())
        compare_to_exact(failures, "predict logits", ours, theirs, exact, None)

    # 2. One SGD step on P ranks with batch B each: rank r trains on samples [r*B, (r+1)*B) (no
    #    shuffling), with its own batch statistics and dropout masks; gradients and running
    #    statistics are averaged over ranks.
    init_state = read_checkpoint(init)
    for ranks, batch in pairs:
        out = os.path.join(root, f"step-np{ranks}")
        cmd = [f"{ST_BIN}/scaletrain", "train", "--model", a.model, "--data", data, "--output-dir", out,
               "--init-from", init, "--max-steps", "1", "--batch-size", str(batch), "--no-shuffle", "--no-augment",
               "--base-lr", str(LR), "--momentum", str(MOMENTUM), "--weight-decay", str(WD),
               "--label-smoothing", str(SMOOTH), "--warmup-epochs", "0", "--threads", "1", "--seed", str(SEED),
               "--image-size", f"{a.size},{a.size}"]
        if a.aux_loss_weight is not None:
            cmd += ["--aux-loss-weight", str(a.aux_loss_weight)]
        run(cmd, np_ranks=ranks)
        ours = read_checkpoint(out)
        theirs = torch_step(a, init_state, images["train"], labels["train"], ranks, batch)
        names = set(theirs) ^ set(ours)
        if names:
            failures.append(f"np{ranks}: tensors differ in name: {sorted(names)[:5]}")
        moved = sum((ours[k] - init_state[k]).abs().sum().item() for k in ours)
        if moved == 0:
            failures.append(f"np{ranks}: the step changed nothing")
        if a.update_l2 is not None:
            exact = torch_step(a, init_state, images["train"], labels["train"], ranks, batch, torch.float64)
            check_update_l2(failures, f"np{ranks}", ours, theirs, init_state, a.update_l2, exact)
            continue
        exact = None
        change = max((theirs[k].double() - init_state[k].double()).abs().max().item() for k in theirs
                     if "running" not in k and k in init_state)
        print(f"np{ranks}: the step's largest change of a parameter: {change:.3g}")
        for k in sorted(set(theirs) & set(ours)):
            if within(ours[k], theirs[k].detach(), 2e-5, 1e-4):
                compare(failures, f"np{ranks} {k}", ours[k], theirs[k].detach(), 2e-5, 1e-4)
                continue
            # Beyond ResNet-20's tolerance of PyTorch's float32 step: judge both against the step
            # in float64. Deep batch-normalised networks at small inputs are ill-conditioned
            # (batch norm over a few values divides rounding errors by small deviations), so
            # PyTorch's own float32 result can be that far from the exact one; ours must be no
            # further from it than a few times PyTorch's own float32 error.
            if exact is None:
                exact = torch_step(a, init_state, images["train"], labels["train"], ranks, batch, torch.float64)
            compare_to_exact(failures, f"np{ranks} {k}", ours[k], theirs[k].detach(), exact[k].detach(),
                             init_state[k])
        shutil.rmtree(out, ignore_errors=True)  # AlexNet's checkpoints are 0.5 GB each

    shutil.rmtree(root, ignore_errors=True)
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print(f"torch cross-check of {a.model} passed")


def torch_step(a, init_state, train_images, train_labels, ranks, batch, dtype=torch.float32):
    weight = a.aux_loss_weight if a.aux_loss_weight is not None else DEFAULT_AUX_WEIGHT.get(a.model, 0.0)
    m = make_model(a.model, 3, a.classes).to(dtype)
    m.load_state_dict(init_state, strict=False)
    x_all = training_input(a.model, train_images).to(dtype)
    y_all = torch.from_numpy(train_labels).long()
    grads = [torch.zeros_like(p) for p in m.parameters()]
    has_grad = [False] * len(grads)
    stats = {}
    for r in range(ranks):
        mr = make_model(a.model, 3, a.classes).to(dtype)
        mr.load_state_dict(m.state_dict())
        set_position = install_philox_dropout(mr, a.model, SEED)  # numbered before heads_off moves modules
        set_position(step=0, micro_batch=0, rank=r)
        if weight == 0:
            heads_off(mr)
        mr.train()
        idx = slice(r * batch, (r + 1) * batch)
        logits, aux = outputs(mr, x_all[idx], weight)
        loss = F.cross_entropy(logits, y_all[idx], label_smoothing=SMOOTH)
        for head in aux:
            loss = loss + weight * F.cross_entropy(head, y_all[idx], label_smoothing=SMOOTH)
        loss.backward()
        by_name = {n.replace("_off.", "."): p for n, p in mr.named_parameters()}
        for i, (name, _) in enumerate(m.named_parameters()):
            q = by_name[name]
            if q.grad is not None:
                grads[i] += q.grad / ranks
                has_grad[i] = True
        for k, v in state_items(mr):
            k = k.replace("_off.", ".")
            if "running" in k:
                stats[k] = stats.get(k, 0) + v / ranks
    # Parameters without a gradient (heads that are off) keep none, so torch.optim skips them.
    opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    for g, used, p in zip(grads, has_grad, m.parameters()):
        p.grad = g if used else None
    opt.step()
    out = {k: v.float() if dtype == torch.float32 else v for k, v in state_items(m)}
    out.update(stats)
    return out


if __name__ == "__main__":
    main()
