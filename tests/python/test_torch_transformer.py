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
has none), must have zero gradients with us. Then one Adam step of the whole model from those
gradients and a second from another logits gradient at the moved weights (the reference's beta1
0.9, beta2 0.997, epsilon 1e-9; Adam's first step does not depend on the betas, its second does)
against torch.optim.Adam in float64: a step moves a weight by about lr * m / sqrt(v), so every
element must land within 1e-3 * lr (plus float32 rounding of the weight) of PyTorch's, except where
PyTorch's float64 gradient is so small (below 1e-6 of the tensor's largest) that rounding decides
its direction; the frozen biases must not move. Exits non-zero on any mismatch."""
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from transformer_reference import Reference  # noqa: E402
from torch_reference import ST_BIN, ST_TMP, compare, run  # noqa: E402
import h5py  # noqa: E402

torch.set_num_threads(1)
HELPER = os.path.join(ST_BIN, "scaletrain_torch_transformer_helper")
root = os.path.join(ST_TMP, "torch_transformer")
shutil.rmtree(root, ignore_errors=True)
os.makedirs(root)
failures = []

V, D, H, F, LAYERS, SEED = 53, 32, 4, 64, 2, 7
ADAM_LR, ADAM_BETAS, ADAM_EPS = 1e-3, (0.9, 0.997), 1e-9
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
dlogits2 = rng.uniform(-1, 1, (N * LT, V)).astype(np.float32)

with h5py.File(os.path.join(root, "in.h5"), "w") as f:
    f.attrs.update(width=D, heads=H, inner=F, layers=LAYERS, vocab=V, seed=SEED, adam_lr=ADAM_LR,
                   adam_beta1=ADAM_BETAS[0], adam_beta2=ADAM_BETAS[1], adam_epsilon=ADAM_EPS)
    f["source"], f["source_lengths"], f["target_input"], f["dlogits"] = source, src_len, target_input, dlogits
    f["dlogits2"] = dlogits2
run([HELPER, os.path.join(root, "in.h5"), os.path.join(root, "out.h5")])
out = h5py.File(os.path.join(root, "out.h5"), "r")
ours_params = {}
out["params"].visititems(lambda k, v: ours_params.__setitem__(k, v[()]) if isinstance(v, h5py.Dataset) else None)
ours_grads = {}
out["grads"].visititems(lambda k, v: ours_grads.__setitem__(k, v[()]) if isinstance(v, h5py.Dataset) else None)
ours_stepped = {}
out["stepped"].visititems(lambda k, v: ours_stepped.__setitem__(k, v[()]) if isinstance(v, h5py.Dataset) else None)


def torch_run(dtype):
    model = Reference(V, D, H, F, LAYERS).to(dtype)
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
        grads[name] = p.grad.double().numpy().copy()  # the second step reuses .grad
    # Two Adam steps of the trained parameters (the attention biases are frozen with us: no step),
    # the second from dlogits2's gradient at the moved weights.
    trained = [p for k, p in model.named_parameters() if not k.endswith(("in_proj_bias", "out_proj.bias"))]
    adam = torch.optim.Adam(trained, lr=ADAM_LR, betas=ADAM_BETAS, eps=ADAM_EPS)
    adam.step()
    adam.zero_grad()
    again = model(torch.tensor(source).long(), torch.tensor(src_len).long(), torch.tensor(target_input).long())
    (again * torch.tensor(dlogits2, dtype=dtype)).sum().backward()
    adam.step()
    stepped = {}
    for k, p in model.named_parameters():
        stepped[k if k == "embedding.weight" else k[len("transformer."):]] = p.detach().double().numpy()
    return logits.detach().double().numpy(), grads, stepped


def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


logits64, grads64, stepped64 = torch_run(torch.float64)
logits32, grads32, _ = torch_run(torch.float32)
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

# The Adam steps: each element within 1e-3 of a step (lr) plus float32 rounding of the weight, but
# where the float64 gradient is too small for its sign to be the same in float32.
moved, undecided = 0, 0
for name in sorted(ours_stepped):
    ours, ref, w0, g = ours_stepped[name], stepped64[name], ours_params[name], grads64[name]
    if name.endswith("in_proj_bias") or name.endswith("out_proj.bias"):
        if np.any(ours != w0):
            failures.append(f"{name}: frozen, yet Adam moved it")
        continue
    limit = 1e-3 * ADAM_LR + 1e-7 * np.abs(w0) + 1e-9
    off = np.abs(ours - ref) > limit
    tiny = np.abs(g) < 1e-6 * np.abs(g).max()
    if np.any(off & ~tiny):
        i = np.flatnonzero((off & ~tiny).ravel())[0]
        failures.append(f"adam step {name}: element {i} is {ours.ravel()[i]:.9g}, torch {ref.ravel()[i]:.9g} "
                        f"(moved from {w0.ravel()[i]:.9g}, gradient {g.ravel()[i]:.3g}; limit {limit.ravel()[i]:.3g})")
    moved += int(np.count_nonzero(ours != w0))
    undecided += int(np.count_nonzero(off & tiny))
print(f"2 adam steps (lr {ADAM_LR}, betas {ADAM_BETAS}, eps {ADAM_EPS}): {moved} elements moved; all within "
      f"1e-3 x lr of torch.optim.Adam in float64 but {undecided} whose gradient is below 1e-6 of their tensor's largest")

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("PASS")
