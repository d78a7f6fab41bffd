"""The MLPerf Transformer (models/transformer.hpp) against PyTorch 1.13's torch.nn.Transformer
(norm_first=True, layer_norm_eps=1e-6, dropout off) loaded with the same weights through the
checkpoint names: embedding.weight for the shared embedding, the rest torch's own state_dict
names. The PyTorch side adds only what nn.Transformer lacks: the shared embedding scaled by
sqrt(D) with padding rows zeroed, the reference's position signal (all sines, then all cosines,
timescales spaced by ln(1e4) / (D/2 - 1)), and logits = h E^T.

One forward (a padded batch of 3 sentence pairs, source lengths 7, 4 and 1) and the backward of
a fixed logits gradient (bin/scaletrain_torch_transformer_helper) are compared with PyTorch in
float64: logits, and the gradient of every trained parameter (the shared embedding's sums the
projection's and both lookups'). PyTorch's float32 run is measured against float64 too: our
error must stay within 3 times PyTorch's own float32 error plus a floor (1e-6 relative L2), and
every element within 1e-5 of the largest magnitude + 1e-4 relative. The attention biases, frozen at zero (the reference
has none), must have zero gradients with us. Exits non-zero on any mismatch."""
import math
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(__file__))
from torch_reference import ST_BIN, ST_TMP, compare, run  # noqa: E402
import h5py  # noqa: E402

torch.set_num_threads(1)
HELPER = os.path.join(ST_BIN, "scaletrain_torch_transformer_helper")
root = os.path.join(ST_TMP, "torch_transformer")
shutil.rmtree(root, ignore_errors=True)
os.makedirs(root)
failures = []

V, D, H, F, LAYERS, SEED = 53, 32, 4, 64, 2, 7
N, LS, LT = 3, 7, 6
rng = np.random.default_rng(1)
src_len = np.array([7, 4, 1], dtype=np.int32)
tgt_len = np.array([6, 3, 5], dtype=np.int32)
source = np.zeros((N, LS), np.int32)
target = np.zeros((N, LT), np.int32)
for n in range(N):
    source[n, :src_len[n] - 1] = rng.integers(2, V, src_len[n] - 1)
    source[n, src_len[n] - 1] = 1  # the end of sentence
    target[n, :tgt_len[n] - 1] = rng.integers(2, V, tgt_len[n] - 1)
    target[n, tgt_len[n] - 1] = 1
target_input = np.concatenate([np.zeros((N, 1), np.int32), target[:, :-1]], axis=1)
dlogits = rng.uniform(-1, 1, (N * LT, V)).astype(np.float32)

with h5py.File(os.path.join(root, "in.h5"), "w") as f:
    f.attrs.update(width=D, heads=H, inner=F, layers=LAYERS, vocab=V, seed=SEED)
    f["source"], f["source_lengths"], f["target_input"], f["dlogits"] = source, src_len, target_input, dlogits
run([HELPER, os.path.join(root, "in.h5"), os.path.join(root, "out.h5")])
out = h5py.File(os.path.join(root, "out.h5"), "r")
ours_params = {}
out["params"].visititems(lambda k, v: ours_params.__setitem__(k, v[()]) if isinstance(v, h5py.Dataset) else None)
ours_grads = {}
out["grads"].visititems(lambda k, v: ours_grads.__setitem__(k, v[()]) if isinstance(v, h5py.Dataset) else None)


def position_signal(length, width):
    half = width // 2
    inc = math.log(1.0e4) / max(half - 1, 1)
    inv = torch.exp(torch.arange(half, dtype=torch.float64) * -inc)
    angle = torch.arange(length, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)


class Reference(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(V, D)
        self.transformer = nn.Transformer(D, H, LAYERS, LAYERS, F, dropout=0.0, norm_first=True,
                                          layer_norm_eps=1e-6, batch_first=True)

    def embed(self, ids):
        e = self.embedding(ids) * math.sqrt(D) * (ids != 0).unsqueeze(-1)
        return e + position_signal(ids.shape[1], D).to(e.dtype)

    def forward(self, src, lengths, tgt_in):
        pad = torch.arange(src.shape[1])[None, :] >= lengths[:, None]
        causal = torch.triu(torch.full((tgt_in.shape[1], tgt_in.shape[1]), float("-inf")), diagonal=1)
        h = self.transformer(self.embed(src), self.embed(tgt_in), tgt_mask=causal.to(self.embedding.weight.dtype),
                             src_key_padding_mask=pad, memory_key_padding_mask=pad)
        return (h @ self.embedding.weight.t()).reshape(-1, V)


def torch_run(dtype):
    model = Reference().to(dtype)
    names = {k for k, _ in model.named_parameters()}
    state = {}
    for k, v in ours_params.items():
        key = k if k == "embedding.weight" else "transformer." + k
        if key not in names:
            failures.append(f"{k}: not a parameter of torch.nn.Transformer (as transformer.{k})")
            continue
        state[key] = torch.tensor(v, dtype=dtype)
    missing = names - set(state)
    if missing:
        failures.append(f"parameters torch has and the checkpoint lacks: {sorted(missing)}")
    model.load_state_dict(state, strict=False)
    model.train()  # dropout is 0; train mode keeps nn.Transformer off its nested-tensor fast path
    logits = model(torch.tensor(source).long(), torch.tensor(src_len).long(), torch.tensor(target_input).long())
    (logits * torch.tensor(dlogits, dtype=dtype)).sum().backward()
    grads = {}
    for k, p in model.named_parameters():
        name = k if k == "embedding.weight" else k[len("transformer."):]
        grads[name] = p.grad.double().numpy()
    return logits.detach().double().numpy(), grads


def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


logits64, grads64 = torch_run(torch.float64)
logits32, grads32 = torch_run(torch.float32)
print(f"{len(ours_params)} parameters, {sum(v.size for v in ours_params.values())} values")


def check(what, ours, t32, t64):
    ours_err, torch_err = rel_l2(ours, t64), rel_l2(t32, t64)
    limit = 3 * torch_err + 1e-6
    print(f"{what}: relative L2 to float64 {ours_err:.3g} (torch float32 {torch_err:.3g}, limit {limit:.3g})")
    if ours_err > limit:
        failures.append(f"{what}: relative L2 {ours_err:.3g} above {limit:.3g}")
    scale = float(np.abs(t64).max())
    compare(failures, what + " elementwise", ours, t64, atol=1e-5 * scale, rtol=1e-4)


check("logits", out["logits"][()], logits32, logits64)
for name in sorted(ours_grads):
    if name.endswith("in_proj_bias") or name.endswith("out_proj.bias"):
        if np.any(ours_grads[name] != 0):
            failures.append(f"{name}: frozen at zero (the reference has no attention bias), yet its gradient is not 0")
        continue
    check("grad " + name, ours_grads[name], grads32[name], grads64[name])

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PASS")
