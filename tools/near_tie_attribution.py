#!/usr/bin/python3
"""Explains the difference between scaletrain's float32 SGD step and PyTorch's float64 step of a
max-pooling network by the decisions that float32 cannot make the way float64 does.

A max pool routes a window's gradient to its largest input, and a ReLU passes a gradient only
where its input is positive. Where two inputs of a window differ by less than float32's rounding
of the forward (a relative gap of about 1e-6 here), or a ReLU input lies that close to 0, a float32
forward may decide either way, and each such decision moves whole gradient values to another
element: an O(1) change of a few elements, which then spreads to every layer upstream. No
elementwise tolerance holds across such a flip, for PyTorch's own float32 step either
(docs/models.md).

This tool runs one step of the cross-check's setup (tests/python/crosscheck_cnn.py: the same data,
weights and options), then the float64 step in PyTorch with max pools that record each window's
top-two gap and ReLUs that record their inputs. The near-ties (gaps below --pool-gap, ReLU inputs
below --relu-gap, both relative to the largest value of the tensor) are the candidates; the effect
of flipping each is one more float64 step. A greedy search then takes, one at a time, the flip that
most reduces the difference between our update and the float64 one, while a flip reduces it by at
least 1%, and prints the update's agreement before and after following those decisions. What it
shows is that the difference is the decisions, not the arithmetic: once the float64 step follows
our few near-tie decisions, the two agree elementwise.

  tools/near_tie_attribution.py MODEL SIZE RANKS BATCH [--pool-gap G] [--relu-gap G]

MODEL is one of the torchvision networks whose convolutions end in F.relu (googlenet,
inception_v3). Minutes: one float64 step per candidate (googlenet at 64x64, batch 4: about 1.5 s
each on one core). Uses ST_BIN (default build/bin) and ST_TMP."""
import argparse
import importlib
import math
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import crosscheck_cnn as cc  # noqa: E402
import torch_reference as tr  # noqa: E402


class Decisions:
    """The near-tie decisions of one float64 step: what the max pools and ReLUs saw (in the order
    they ran) and which of their decisions to flip."""

    def __init__(self, pool_flips=(), relu_flips=()):
        self.pool_flips, self.relu_flips = set(pool_flips), set(relu_flips)
        self.pool_gaps, self.relu_inputs = [], []


CURRENT = Decisions()


class TieAwareMaxPool(nn.Module):
    """nn.MaxPool2d through unfold and gather (so that a window can take its second-largest input),
    recording each window's relative gap between its two largest inputs. Windows whose largest
    input is not positive (after a ReLU: every gradient there is stopped anyway) or that hold the
    same element twice (exact ties of duplicated values) are not near-ties."""

    def __init__(self, pool):
        super().__init__()
        pair = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v, v)  # noqa: E731
        self.k, self.s, self.p, self.ceil = pair(pool.kernel_size), pair(pool.stride), pair(pool.padding), pool.ceil_mode

    def out_size(self, n, d):
        k, s, p = self.k[d], self.s[d], self.p[d]
        if not self.ceil:
            return (n + 2 * p - k) // s + 1
        o = -(-(n + 2 * p - k) // s) + 1
        return o - 1 if (o - 1) * s >= n + p else o  # the last window must start inside the input

    def forward(self, x):
        n, c, h, w = x.shape
        oh, ow = self.out_size(h, 0), self.out_size(w, 1)
        ph, pw = (oh - 1) * self.s[0] + self.k[0], (ow - 1) * self.s[1] + self.k[1]
        padded = F.pad(x, (self.p[1], pw - w - self.p[1], self.p[0], ph - h - self.p[0]), value=-math.inf)
        cols = F.unfold(padded.reshape(n * c, 1, ph, pw), self.k, stride=self.s)  # (n*c, k*k, windows)
        top = cols.detach().topk(2, dim=1)
        gap = (top.values[:, 0] - top.values[:, 1]) / x.detach().abs().amax()
        gap = torch.where((top.values[:, 0] > 0) & (gap > 0), gap, torch.full_like(gap, math.inf))
        me = len(CURRENT.pool_gaps)
        CURRENT.pool_gaps.append(gap)
        pick = top.indices[:, :1].clone()
        for pool, (row, window) in CURRENT.pool_flips:
            if pool == me:
                pick[row, 0, window] = top.indices[row, 1, window]
        return cols.gather(1, pick).reshape(n, c, oh, ow)


class FunctionalShim:
    """Stands for torch.nn.functional in the torchvision model's module: its relu records its input
    and passes or stops the gradient of the listed elements the other way; its max_pool2d (which
    Inception-v3's blocks call) is a TieAwareMaxPool."""

    def __getattr__(self, name):
        return getattr(F, name)

    def max_pool2d(self, x, kernel_size, stride=None, padding=0, ceil_mode=False):
        return TieAwareMaxPool(nn.MaxPool2d(kernel_size, stride, padding, ceil_mode=ceil_mode))(x)

    def relu(self, x, inplace=False):
        me = len(CURRENT.relu_inputs)
        CURRENT.relu_inputs.append(x.detach().clone())
        keep = x > 0
        flips = [i for call, i in CURRENT.relu_flips if call == me]
        if flips:
            keep = keep.clone().reshape(-1)
            keep[flips] = ~keep[flips]
            keep = keep.reshape(x.shape)
        return x * keep


def tie_aware(model):
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.MaxPool2d):
                setattr(module, name, TieAwareMaxPool(child))
    return model


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", choices=["googlenet", "inception_v3"])
    p.add_argument("size", type=int)
    p.add_argument("ranks", type=int)
    p.add_argument("batch", type=int)
    p.add_argument("--pool-gap", type=float, default=3e-6, help="a max-pool window is a near-tie below this gap")
    p.add_argument("--relu-gap", type=float, default=1e-5, help="a ReLU input is a near-tie below this |value|")
    p.add_argument("--classes", type=int, default=10)
    return p.parse_args()


def our_step(a, root):
    """The cross-check's data, weights and one step of ours on RANKS x BATCH (crosscheck_cnn.main)."""
    rng = np.random.default_rng(0)
    images = {"train": rng.integers(0, 256, (a.ranks * a.batch, a.size, a.size, 3), dtype=np.uint8),
              "val": rng.integers(0, 256, (4, a.size, a.size, 3), dtype=np.uint8)}
    labels = {s: rng.integers(0, a.classes, len(v)).astype(np.int32) for s, v in images.items()}
    data = os.path.join(root, "data")
    tr.write_dataset(data, images, labels, a.classes, cc.MEAN, cc.STD, shards=1)
    model = tr.make_model(a.model, 3, a.classes)
    cc.prepare_weights(model, tr.normalise(images["val"], cc.MEAN, cc.STD))
    init = os.path.join(root, "init.h5")
    tr.write_checkpoint(init, a.model, model)
    out = os.path.join(root, "step")
    tr.run([f"{tr.ST_BIN}/scaletrain", "train", "--model", a.model, "--data", data, "--output-dir", out,
            "--init-from", init, "--max-steps", "1", "--batch-size", str(a.batch), "--no-shuffle", "--no-augment",
            "--base-lr", str(cc.LR), "--momentum", str(cc.MOMENTUM), "--weight-decay", str(cc.WD),
            "--label-smoothing", str(cc.SMOOTH), "--warmup-epochs", "0", "--threads", "1", "--seed", str(cc.SEED),
            "--image-size", f"{a.size},{a.size}"], np_ranks=a.ranks)
    return tr.read_checkpoint(init), tr.read_checkpoint(out), images, labels


def main():
    global CURRENT
    a = parse_args()
    a.aux_loss_weight = None  # the model's default, as the cross-check
    torch.manual_seed(0)
    torch.set_num_threads(1)
    root = os.path.join(tr.ST_TMP, f"near_ties_{a.model}")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    before, ours, images, labels = our_step(a, root)

    model_module = importlib.import_module(type(tr.make_model(a.model, 3, a.classes)).__module__)
    model_module.F = FunctionalShim()
    cc.make_model = lambda *args: tie_aware(tr.make_model(*args))

    def float64_step(decisions):
        global CURRENT
        CURRENT = decisions
        return cc.torch_step(a, before, images["train"], labels["train"], a.ranks, a.batch, torch.float64)

    keys = [k for k in ours if "running" not in k and k in before]
    flat = lambda state: torch.cat([state[k].double().flatten() for k in keys])  # noqa: E731
    seen = Decisions()
    exact = float64_step(seen)
    candidates = {}
    for pool, gaps in enumerate(seen.pool_gaps):
        for i in (gaps.flatten() < a.pool_gap).nonzero().flatten().tolist():
            candidates[("pool", pool, divmod(i, gaps.shape[1]))] = gaps.flatten()[i].item()
    for call, x in enumerate(seen.relu_inputs):
        r = (x.abs() / x.abs().amax()).flatten()
        for i in ((r < a.relu_gap) & (r > 0)).nonzero().flatten().tolist():
            candidates[("relu", call, i)] = r[i].item()
    print(f"{a.model} {a.size}x{a.size}, {a.ranks} rank(s) x {a.batch}: {len(seen.pool_gaps)} max pools and "
          f"{len(seen.relu_inputs)} ReLUs ran; near-ties: {sum(c[0] == 'pool' for c in candidates)} pool windows "
          f"below {a.pool_gap:g}, {sum(c[0] == 'relu' for c in candidates)} ReLU inputs below {a.relu_gap:g}")

    def flipped(chosen):
        return Decisions([(c[1], c[2]) for c in chosen if c[0] == "pool"],
                         [(c[1], c[2]) for c in chosen if c[0] == "relu"])

    base = flat(exact)
    scale = (base - flat(before)).norm().item()
    effect = {c: flat(float64_step(flipped([c]))) - base for c in candidates}
    residual, chosen = flat(ours) - base, []
    print(f"our update against the float64 step: relative L2 {residual.norm().item() / scale:.3g}")
    while effect:
        best = min(effect, key=lambda c: (residual - effect[c]).norm().item())
        if (residual - effect[best]).norm() >= 0.99 * residual.norm():
            break
        residual = residual - effect.pop(best)
        chosen.append(best)
        print(f"  follow our decision at {best[0]} {best[1]} {best[2]} (relative gap {candidates[best]:.2e}): "
              f"relative L2 {residual.norm().item() / scale:.3g}")
    followed = float64_step(flipped(chosen))
    CURRENT = Decisions()
    torch32 = cc.torch_step(a, before, images["train"], labels["train"], a.ranks, a.batch, torch.float32)
    for who, mine, what, ref in (("ours", ours, "the float64 step", exact),
                                 ("ours", ours, f"the float64 step with our {len(chosen)} decision(s)", followed),
                                 ("PyTorch's float32 step", torch32, "the float64 step", exact)):
        l2 = cc.relative_update_error(mine, ref, before)
        worst_change, worst_resnet = (0.0, ""), (0.0, "")
        for k in keys:
            d = (mine[k].double() - ref[k].double()).abs()
            change = (ref[k].double() - before[k].double()).abs().max().item()
            worst_change = max(worst_change, (d.max().item() / max(2e-5, 0.01 * change), k))
            worst_resnet = max(worst_resnet, ((d / (2e-5 + 1e-4 * ref[k].double().abs())).max().item(), k))
        print(f"{who} against {what}: relative L2 of the update {l2:.3g}; largest elementwise difference over "
              f"max(2e-5, 1% of the tensor's largest change) {worst_change[0]:.3g} ({worst_change[1]}); over "
              f"ResNet-20's tolerance 2e-5 + 1e-4 |w| {worst_resnet[0]:.3g} ({worst_resnet[1]})")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
