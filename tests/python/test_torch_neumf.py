"""Cross-check of scaletrain's NeuMF against a PyTorch NeuMF written here from the MLPerf v0.5 NCF
reference (mlcommons/training, retired_benchmarks/ncf/neumf.py): the reference's sizes (mf_dim 64,
MLP 256-256-128-64) on a small catalogue, its initialisation, then the state_dict written to HDF5
by name and loaded by name into the C++ model (bin/scaletrain_torch_neumf_helper), the same
(user, item, target) batch, BCE-with-logits (mean), backward. Exits non-zero on any mismatch.

Two weight sets: the reference's initialisation (embeddings normal(0, 0.01), so the MLP runs
near its biases), and one with embeddings normal(0, 0.5) so that the MLP's ReLUs see inputs of
both signs driven by the embeddings.

Tolerances, fp32 on both sides (|ours - torch| <= atol + rtol * |torch|; oneDNN's and torch's
GEMMs sum in different orders):
- logits: 1e-6 + 1e-5 rel;
- loss: 1e-6 rel;
- gradients: atol 1e-5 * max|torch gradient| of that tensor + 1e-4 rel (embedding rows sum
  repeated ids in another order than torch).
"""
import os
import shutil
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from torch_reference import ST_BIN, ST_TMP, NeuMF, compare, run  # noqa: E402
import h5py  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
rng = np.random.default_rng(0)
HELPER = os.path.join(ST_BIN, "scaletrain_torch_neumf_helper")
USERS, ITEMS, N = 300, 500, 2048  # ids drawn with repeats; the last 10 users and items unused
MF_DIM, LAYERS = 64, [256, 256, 128, 64]

root = os.path.join(ST_TMP, "torch_neumf")
shutil.rmtree(root, ignore_errors=True)
os.makedirs(root)
failures = []


users = rng.integers(0, USERS - 10, N).astype(np.int32)
items = rng.integers(0, ITEMS - 10, N).astype(np.int32)
targets = (rng.random(N) < 0.2).astype(np.float32)  # 1 positive : 4 negatives, as the reference samples

for weights in ("reference-init", "wide-embeddings"):
    model = NeuMF(USERS, ITEMS, MF_DIM, LAYERS)
    if weights == "wide-embeddings":
        for embed in (model.mf_user_embed, model.mf_item_embed, model.mlp_user_embed, model.mlp_item_embed):
            embed.weight.data.normal_(0.0, 0.5)
    state = model.state_dict()
    want_names = ["mf_user_embed.weight", "mf_item_embed.weight", "mlp_user_embed.weight", "mlp_item_embed.weight"]
    want_names += [f"mlp.{k}.{p}" for k in range(len(LAYERS) - 1) for p in ("weight", "bias")]
    want_names += ["final.weight", "final.bias"]
    if list(state) != want_names:
        failures.append(f"{weights}: torch state_dict names {list(state)}")

    in_path, out_path = os.path.join(root, f"in-{weights}.h5"), os.path.join(root, f"out-{weights}.h5")
    with h5py.File(in_path, "w") as f:
        for name, value in state.items():
            f.create_dataset(name, data=value.numpy())
        f.create_dataset("users", data=users)
        f.create_dataset("items", data=items)
        f.create_dataset("targets", data=targets)
    run([HELPER, in_path, out_path])

    logits = model(torch.from_numpy(users).long(), torch.from_numpy(items).long()).reshape(-1)
    loss = F.binary_cross_entropy_with_logits(logits, torch.from_numpy(targets))
    model.zero_grad()
    loss.backward()
    with h5py.File(out_path, "r") as f:
        compare(failures, f"{weights}: logits", f["logits"][()], logits.detach(), 1e-6, 1e-5)
        compare(failures, f"{weights}: loss", f["loss"][()], loss.detach().reshape(1), 0.0, 1e-6)
        grads = f["grad"]
        if sorted(grads) != sorted(want_names):
            failures.append(f"{weights}: gradients written for {sorted(grads)}")
        for name, param in model.named_parameters():
            if name not in grads:
                continue
            want = param.grad
            compare(failures, f"{weights}: grad {name}", grads[name][()], want, 1e-5 * want.abs().max().item(), 1e-4)

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("NeuMF agrees with PyTorch")
