"""Cross-check of the Transformer's ops (issue 25) against PyTorch 1.13: the same inputs (through
an HDF5 file) go to scaletrain's kernels (bin/scaletrain_torch_transformer_ops_helper) and to
torch, forward and backward.

- Layer norm against F.layer_norm (eps 1e-6, the MLPerf reference's).
- Attention, composed of our batched products and masked softmax as the model will compose them,
  against torch.nn.MultiheadAttention with identity input and output projections (so that its
  heads see our Q, K and V): encoder-decoder attention with each source's padding mask
  (key_padding_mask), and decoder self-attention with the causal mask (attn_mask) and padding.
- The token loss against F.cross_entropy(label_smoothing=0.1, ignore_index=0, reduction='sum'),
  its gradient that of the sum over a normaliser (the global batch's real tokens).

Tolerances (|ours - torch| <= atol + rtol * |torch|): layer norm 1e-5 + 1e-5 rel (forward, dx) and
1e-5 + 1e-5 rel (parameter gradients, sums over 64 rows); attention 1e-5 + 1e-4 rel (torch's
float sums against ours); loss 1e-5 rel, its gradient 1e-7 + 1e-4 rel. Exits non-zero on any
mismatch."""
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from torch_reference import ST_BIN, ST_TMP, compare, run  # noqa: E402
import h5py  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
rng = np.random.default_rng(0)
HELPER = os.path.join(ST_BIN, "scaletrain_torch_transformer_ops_helper")
root = os.path.join(ST_TMP, "torch_transformer_ops")
shutil.rmtree(root, ignore_errors=True)
os.makedirs(root)
failures = []


def f32(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


M, D = 64, 48
N, H, DK = 3, 4, 8
ATTENTION = {"cross": (5, 7, False), "causal": (6, 6, True)}  # name: (Lq, Lk, causal)
T, V, NORMALISER = 40, 37, 90.0

inputs = {"ln_x": f32(M, D, lo=-2.0, hi=3.0), "ln_gamma": f32(D, lo=0.5, hi=1.5), "ln_beta": f32(D),
          "ln_dy": f32(M, D)}
for name, (lq, lk, causal) in ATTENTION.items():
    inputs[f"{name}_q"] = f32(N, H, lq, DK, lo=-2.0, hi=2.0)
    inputs[f"{name}_k"] = f32(N, H, lk, DK, lo=-2.0, hi=2.0)
    inputs[f"{name}_v"] = f32(N, H, lk, DK)
    inputs[f"{name}_do"] = f32(N, H, lq, DK)
    inputs[f"{name}_lengths"] = np.array([lk] + list(rng.integers(1, lk + 1, N - 1)), dtype=np.int32)
labels = rng.integers(1, V, T).astype(np.int32)
labels[rng.random(T) < 0.3] = 0  # padding
inputs.update({"xent_logits": f32(T, V, lo=-4.0, hi=4.0), "xent_labels": labels,
               "xent_normaliser": np.array([NORMALISER], dtype=np.float32)})
with h5py.File(os.path.join(root, "in.h5"), "w") as f:
    for name, value in inputs.items():
        f.create_dataset(name, data=value)
run([HELPER, os.path.join(root, "in.h5"), os.path.join(root, "out.h5")])
with h5py.File(os.path.join(root, "out.h5"), "r") as f:
    ours = {name: np.array(f[name]) for name in f}
t = {name: torch.from_numpy(value) for name, value in inputs.items()}

# Layer norm.
x, gamma, beta = (t[k].clone().requires_grad_() for k in ("ln_x", "ln_gamma", "ln_beta"))
y = F.layer_norm(x, (D,), gamma, beta, eps=1e-6)
y.backward(t["ln_dy"])
compare(failures, "layer norm y", ours["ln_y"], y.detach(), 1e-5, 1e-5)
compare(failures, "layer norm dx", ours["ln_dx"], x.grad, 1e-5, 1e-5)
compare(failures, "layer norm dgamma", ours["ln_dgamma"], gamma.grad, 1e-5, 1e-5)
compare(failures, "layer norm dbeta", ours["ln_dbeta"], beta.grad, 1e-5, 1e-5)


def torch_attention(name, lq, lk, causal):
    """nn.MultiheadAttention, batch first, embed dim H * DK, identity projections, no bias: head h
    sees columns [h DK, (h + 1) DK) of query, key and value, which are our Q, K, V of that head."""
    e = H * DK
    mha = torch.nn.MultiheadAttention(e, H, bias=False, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([torch.eye(e)] * 3))
        mha.out_proj.weight.copy_(torch.eye(e))
    as_embed = lambda a: a.permute(0, 2, 1, 3).reshape(N, a.shape[2], e)  # noqa: E731 (N, H, L, DK) -> (N, L, H DK)
    q, k, v = (as_embed(t[f"{name}_{s}"]).clone().requires_grad_() for s in "qkv")
    lengths = t[f"{name}_lengths"].long()
    key_padding_mask = torch.arange(lk)[None, :] >= lengths[:, None]
    attn_mask = torch.triu(torch.ones(lq, lk, dtype=torch.bool), 1) if causal else None
    out, _ = mha(q, k, v, key_padding_mask=key_padding_mask, attn_mask=attn_mask, need_weights=False)
    out.backward(as_embed(t[f"{name}_do"]))
    back = lambda a, length: a.reshape(N, length, H, DK).permute(0, 2, 1, 3)  # noqa: E731
    return back(out.detach(), lq), back(q.grad, lq), back(k.grad, lk), back(v.grad, lk)


for name, (lq, lk, causal) in ATTENTION.items():
    o, dq, dk, dv = torch_attention(name, lq, lk, causal)
    compare(failures, f"{name} attention output", ours[f"{name}_o"], o, 1e-5, 1e-4)
    compare(failures, f"{name} attention dq", ours[f"{name}_dq"], dq, 1e-5, 1e-4)
    compare(failures, f"{name} attention dk", ours[f"{name}_dk"], dk, 1e-5, 1e-4)
    compare(failures, f"{name} attention dv", ours[f"{name}_dv"], dv, 1e-5, 1e-4)

# Token loss: the sum over real tokens; the gradient of the sum over the normaliser.
logits = t["xent_logits"].clone().requires_grad_()
loss_sum = F.cross_entropy(logits, t["xent_labels"].long(), ignore_index=0, label_smoothing=0.1, reduction="sum")
(loss_sum / NORMALISER).backward()
real = int((labels != 0).sum())
compare(failures, "token loss sum", ours["xent_sum"], loss_sum.detach().reshape(1), 0.0, 1e-5)
compare(failures, "token loss tokens", ours["xent_tokens"], torch.tensor([float(real)]), 0.0, 0.0)
compare(failures, "token loss dlogits", ours["xent_dlogits"], logits.grad, 1e-7, 1e-4)
if not np.all(ours["xent_dlogits"][labels == 0] == 0):
    failures.append("token loss: a padding token's gradient row is not zero")

shutil.rmtree(root, ignore_errors=True)
if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("torch cross-check of the Transformer's ops passed")
