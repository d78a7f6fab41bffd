"""Cross-check against PyTorch 1.13: the same weights (through the checkpoint format) and inputs
give the same logits, and one SGD step (1 and 2 ranks) gives the same weights and batch-norm
running statistics. Exits non-zero on any mismatch."""
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from torch_reference import (ST_BIN, ST_TMP, make_model, normalise, read_checkpoint, run, state_items,  # noqa: E402
                             write_checkpoint, write_dataset)
import h5py  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
MODEL, C, H, W, K = "resnet20", 3, 16, 16, 10
N_TRAIN, N_VAL = 32, 8
LR, MOMENTUM, WD, SMOOTH = 0.05, 0.9, 1e-3, 0.1
MEAN, STD = [0.4, 0.5, 0.6], [0.2, 0.25, 0.3]

root = os.path.join(ST_TMP, "torch_crosscheck")
shutil.rmtree(root, ignore_errors=True)
os.makedirs(root)
rng = np.random.default_rng(0)
images = {"train": rng.integers(0, 256, (N_TRAIN, H, W, C), dtype=np.uint8),
          "val": rng.integers(0, 256, (N_VAL, H, W, C), dtype=np.uint8)}
labels = {s: rng.integers(0, K, len(v)).astype(np.int32) for s, v in images.items()}
data = os.path.join(root, "data")
write_dataset(data, images, labels, K, MEAN, STD, shards=2)

model = make_model(MODEL, C, K)
# Non-trivial batch-norm parameters and statistics, so that every term is exercised.
with torch.no_grad():
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.weight.uniform_(0.5, 1.5)
            m.bias.uniform_(-0.2, 0.2)
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
init = os.path.join(root, "init.h5")
write_checkpoint(init, MODEL, model)
failures = []


def compare(what, got, want, atol, rtol):
    err = (got - want).abs()
    tol = atol + rtol * want.abs()
    bad = (err > tol).sum().item()
    worst = (err / tol).max().item()
    print(f"{what}: max |diff| {err.max().item():.3g}, worst/tolerance {worst:.3f}")
    if bad:
        failures.append(f"{what}: {bad} of {err.numel()} elements off")


# 1. Logits: predict on normalised inputs, batch norm in evaluation mode.
x_val = normalise(images["val"], MEAN, STD)
with h5py.File(os.path.join(root, "in.h5"), "w") as f:
    f.create_dataset("inputs", data=x_val.numpy())
run([f"{ST_BIN}/scaletrain", "predict", "--model", MODEL, "--checkpoint", init, "--input",
     os.path.join(root, "in.h5"), "--output", os.path.join(root, "out.h5"), "--threads", "1"])
with h5py.File(os.path.join(root, "out.h5"), "r") as f:
    ours = torch.from_numpy(np.array(f["logits"]))
model.eval()
with torch.no_grad():
    theirs = model(x_val)
compare("predict logits", ours, theirs, 1e-4, 1e-4)


# 2. One SGD step on P ranks with batch B each: rank r trains on samples [r*N/P, r*N/P + B)
#    (no shuffling), with its own batch statistics; gradients are averaged over ranks; running
#    statistics are averaged over ranks before the checkpoint is written.
def torch_step(ranks, batch):
    m = make_model(MODEL, C, K)
    m.load_state_dict({k: v for k, v in read_checkpoint(init).items()}, strict=False)
    m.train()
    x_all = normalise(images["train"], MEAN, STD)
    y_all = torch.from_numpy(labels["train"]).long()
    grads = [torch.zeros_like(p) for p in m.parameters()]
    stats = {}
    share = N_TRAIN // ranks
    for r in range(ranks):
        mr = make_model(MODEL, C, K)
        mr.load_state_dict(m.state_dict())
        mr.train()
        idx = slice(r * share, r * share + batch)
        loss = F.cross_entropy(mr(x_all[idx]), y_all[idx], label_smoothing=SMOOTH)
        loss.backward()
        for g, p in zip(grads, mr.parameters()):
            g += p.grad / ranks
        for k, v in state_items(mr):
            if "running" in k:
                stats[k] = stats.get(k, 0) + v / ranks
    opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    for g, p in zip(grads, m.parameters()):
        p.grad = g
    opt.step()
    out = dict(state_items(m))
    out.update(stats)
    return out


for ranks, batch in [(1, 8), (2, 4)]:
    out = os.path.join(root, f"step-np{ranks}")
    run([f"{ST_BIN}/scaletrain", "train", "--model", MODEL, "--data", data, "--output-dir", out,
         "--init-from", init, "--max-steps", "1", "--batch-size", str(batch), "--no-shuffle", "--no-augment",
         "--base-lr", str(LR), "--momentum", str(MOMENTUM), "--weight-decay", str(WD),
         "--label-smoothing", str(SMOOTH), "--warmup-epochs", "0", "--threads", "1"], np_ranks=ranks)
    ours = read_checkpoint(out)
    theirs = torch_step(ranks, batch)
    missing = set(theirs) ^ set(ours)
    if missing:
        failures.append(f"np{ranks}: tensors differ in name: {sorted(missing)[:5]}")
    before = read_checkpoint(init)
    moved = sum((ours[k] - before[k]).abs().sum().item() for k in ours)
    if moved == 0:
        failures.append(f"np{ranks}: the step changed nothing")
    for k in sorted(set(theirs) & set(ours)):
        compare(f"np{ranks} {k}", ours[k], theirs[k].detach(), 2e-5, 1e-4)

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("torch cross-check passed")
