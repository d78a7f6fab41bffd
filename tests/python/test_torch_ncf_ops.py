"""Cross-check of the NCF ops and Adam against PyTorch 1.13: the same inputs (through an HDF5 file)
go to scaletrain's kernels (bin/scaletrain_torch_ncf_ops_helper) and to torch, forward and
backward; Adam runs a few steps from the same weights and gradients as torch.optim.Adam, once with
the MLPerf NCF reference's betas and once with NVIDIA's large-batch ones. Exits non-zero on any
mismatch.

Tolerances (|ours - torch| <= atol + rtol * |torch|):
- embedding forward, multiply, concat: exact (copies and one float product per element);
- embedding backward: 1e-6 + 1e-5 rel (repeated rows sum in a different order from torch's);
- BCE-with-logits: loss 1e-6 rel (torch sums in float), gradient 1e-8 + 1e-5 rel;
- Adam: weights 1e-6 + 1e-6 rel after each of 5 steps (a few float ulps of drift), moments 1e-5 rel.
- LazyAdam (--optimizer lazy_adam) on a lookup-only table against torch.optim.SparseAdam fed the
  touched rows as a sparse gradient: rows no step touched exactly as they were; the rest 1e-6 +
  1e-5 rel after each step (SparseAdam groups the bias corrections as TensorFlow does, epsilon
  added before the second moment's correction: a 1e-8 difference at these gradients), moments
  1e-6 + 1e-5 rel (SparseAdam rounds m + (g - m)(1 - b1), we b1 m + (1 - b1) g). Adam on the same table would move the rows a step skipped: the test checks that too.
"""
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
HELPER = os.path.join(ST_BIN, "scaletrain_torch_ncf_ops_helper")
V, D, N = 13, 8, 1000  # many repeats per row; rows 11 and 12 never looked up
A, B = 5, 11
P, STEPS, LR = 257, 5, 0.01
ADAM_CONFIGS = {"mlperf-reference": (0.9, 0.999, 1e-8), "nvidia-large-batch": (0.25, 0.5, 1e-8)}

root = os.path.join(ST_TMP, "torch_ncf_ops")
shutil.rmtree(root, ignore_errors=True)
os.makedirs(root)
failures = []


def f32(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)



inputs = {
    "table": f32(V, D), "indices": rng.integers(0, V - 2, N).astype(np.int32), "dout": f32(N, D),
    "a": f32(N, D), "b": f32(N, D), "dy": f32(N, D),
    "left": f32(N, A), "right": f32(N, B), "dcat": f32(N, A + B),
    "logits": f32(N, 1, lo=-12.0, hi=12.0), "targets": (rng.random((N, 1)) < 0.2).astype(np.float32),
    "adam_w": f32(P), "adam_grads": f32(STEPS, P, lo=-3.0, hi=3.0),
}
inputs["adam_grads"][:, :7] = 0.0  # rows of an embedding that a batch did not touch
# LazyAdam: a 40 x 8 table; in each step about a third of the rows untouched (zero gradient),
# row 39 in every step.
R, W = 40, 8
inputs["lazy_w"] = f32(R, W)
inputs["lazy_grads"] = f32(STEPS, R, W, lo=-3.0, hi=3.0)
touched = rng.random((STEPS, R)) < 0.65
touched[:, R - 1] = False
inputs["lazy_grads"][~touched] = 0.0
with h5py.File(os.path.join(root, "in.h5"), "w") as f:
    for name, value in inputs.items():
        f.create_dataset(name, data=value)
t = {name: torch.from_numpy(value) for name, value in inputs.items()}

# Embedding: dense gradient of torch's lookup (scale_grad_by_freq off, as NCF uses it).
table = t["table"].clone().requires_grad_()
emb = F.embedding(t["indices"].long(), table)
emb.backward(t["dout"])
# Multiply and concatenation by autograd.
a, b = t["a"].clone().requires_grad_(), t["b"].clone().requires_grad_()
prod = a * b
prod.backward(t["dy"])
left, right = t["left"].clone().requires_grad_(), t["right"].clone().requires_grad_()
cat = torch.cat([left, right], 1)
cat.backward(t["dcat"])
# BCE with logits, mean over the batch: the MLPerf NCF reference's loss.
logits = t["logits"].clone().requires_grad_()
loss = F.binary_cross_entropy_with_logits(logits, t["targets"])
loss.backward()

for config, (beta1, beta2, eps) in ADAM_CONFIGS.items():
    out_path = os.path.join(root, f"out-{config}.h5")
    run([HELPER, os.path.join(root, "in.h5"), out_path, repr(LR), repr(beta1), repr(beta2), repr(eps)])
    with h5py.File(out_path, "r") as f:
        ours = {name: np.array(f[name]) for name in f}
    if config == "mlperf-reference":  # the ops do not depend on the optimizer: check them once
        compare(failures, "embedding forward", ours["out"], emb.detach(), 0.0, 0.0)
        compare(failures, "embedding backward (repeated indices)", ours["dtable"], table.grad, 1e-6, 1e-5)
        compare(failures, "multiply forward", ours["y"], prod.detach(), 0.0, 0.0)
        compare(failures, "multiply backward a", ours["da"], a.grad, 0.0, 0.0)
        compare(failures, "multiply backward b", ours["db"], b.grad, 0.0, 0.0)
        compare(failures, "concat forward", ours["cat"], cat.detach(), 0.0, 0.0)
        compare(failures, "concat backward left", ours["dleft"], left.grad, 0.0, 0.0)
        compare(failures, "concat backward right", ours["dright"], right.grad, 0.0, 0.0)
        compare(failures, "bce-with-logits loss", ours["loss"], loss.detach().reshape(1), 0.0, 1e-6)
        compare(failures, "bce-with-logits gradient", ours["dlogits"], logits.grad, 1e-8, 1e-5)

    w = t["adam_w"].clone().requires_grad_()
    opt = torch.optim.Adam([w], lr=LR, betas=(beta1, beta2), eps=eps)
    history = []
    for s in range(STEPS):
        w.grad = t["adam_grads"][s].clone()
        opt.step()
        history.append(w.detach().clone())
    state = opt.state[w]
    compare(failures, f"adam {config}: weights after each step", ours["adam_w"], torch.stack(history), 1e-6, 1e-6)
    compare(failures, f"adam {config}: first moment", ours["adam_m"], state["exp_avg"], 1e-9, 1e-5)
    compare(failures, f"adam {config}: second moment", ours["adam_v"], state["exp_avg_sq"], 1e-9, 1e-5)
    compare(failures, f"adam {config}: untouched weights", ours["adam_w"][:, :7], torch.stack(history)[:, :7], 0.0, 0.0)

    lazy_table = t["lazy_w"].clone().requires_grad_()
    sparse = torch.optim.SparseAdam([lazy_table], lr=LR, betas=(beta1, beta2), eps=eps)
    history = []
    for s in range(STEPS):
        rows = torch.from_numpy(np.nonzero(touched[s])[0])
        lazy_table.grad = torch.sparse_coo_tensor(rows.unsqueeze(0), t["lazy_grads"][s][rows], (R, W))
        sparse.step()
        history.append(lazy_table.detach().clone())
    state = sparse.state[lazy_table]
    compare(failures, f"lazy_adam {config}: weights after each step", ours["lazy_w_steps"], torch.stack(history),
            1e-6, 1e-5)
    # SparseAdam rounds m + (g - m)(1 - b1), ours b1 m + (1 - b1) g: a few 1e-8 apart at these sizes.
    compare(failures, f"lazy_adam {config}: first moment", ours["lazy_m"], state["exp_avg"].reshape(-1), 1e-6, 1e-5)
    compare(failures, f"lazy_adam {config}: second moment", ours["lazy_v"], state["exp_avg_sq"].reshape(-1), 1e-9,
            1e-5)
    compare(failures, f"lazy_adam {config}: the row no step touched", ours["lazy_w_steps"][:, R - 1],
            t["lazy_w"][R - 1].expand(STEPS, W), 0.0, 0.0)
    # The test can fail: dense Adam on the same table moves the skipped rows on their momentum.
    dense = t["lazy_w"].clone().requires_grad_()
    adam = torch.optim.Adam([dense], lr=LR, betas=(beta1, beta2), eps=eps)
    for s in range(STEPS):
        dense.grad = t["lazy_grads"][s].clone()
        adam.step()
    moved = (dense.detach() - torch.stack(history)[-1]).abs().max().item()
    if moved < 1e-4:
        failures.append(f"lazy_adam {config}: dense Adam ends within {moved:.3g} of SparseAdam: the check is vacuous")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("all NCF ops and Adam agree with PyTorch")
