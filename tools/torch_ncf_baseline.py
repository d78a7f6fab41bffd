#!/usr/bin/env python3
"""PyTorch baseline for NCF training throughput (tools/bench_ncf.sh, docs/performance.md): the
MLPerf v0.5 NeuMF (tests/python/torch_reference.py's NeuMF: mf_dim 64, MLP 256-256-128-64, the
reference's initialisation) trained on a scaletrain recommendation dataset, one process with N
threads, as scaletrain trains it: the training positives read from DIR/train, 4 negatives per
positive drawn uniformly over the items (as scaletrain's sampler and the reference), the epoch's
samples shuffled, BCE-with-logits (mean), backward (dense embedding gradients, nn.Embedding's
default, as scaletrain's), torch.optim.Adam over every parameter (no weight decay).

The epoch's samples are drawn before the clock starts (scaletrain draws them at the start of the
epoch in its batch source; its data wait is in report.json's step_split). The clock covers every
step, the first included, as report.json's throughput.samples_per_s does.

  /usr/bin/python3 tools/torch_ncf_baseline.py --data DIR --threads 2 --batch-size 1024 --max-steps 50
"""
import argparse
import glob
import os
import sys
import time

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_blas import require_fast_blas  # noqa: E402
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
from torch_reference import NeuMF  # noqa: E402


def read_positives(data_dir):
    users, items, num_users, num_items = [], [], None, None
    shards = sorted(glob.glob(os.path.join(data_dir, "train", "shard-*.h5")))
    if not shards:
        sys.exit(f"torch_ncf_baseline: no shards in {data_dir}/train")
    for path in shards:
        with h5py.File(path, "r") as f:
            num_users, num_items = int(f.attrs["num_users"]), int(f.attrs["num_items"])
            users.append(f["user"][()])
            items.append(f["item"][()])
    return np.concatenate(users), np.concatenate(items), num_users, num_items


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="scaletrain recommendation dataset (scaletrain-data synthetic)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--max-steps", type=int, default=50)
    p.add_argument("--lr", type=float, default=0.0045)
    p.add_argument("--beta1", type=float, default=0.25)
    p.add_argument("--beta2", type=float, default=0.5)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--negatives", type=int, default=4)
    p.add_argument("--mf-dim", type=int, default=64)
    p.add_argument("--layers", default="256,256,128,64")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    require_fast_blas("torch_ncf_baseline")
    torch.manual_seed(a.seed)

    pos_u, pos_i, num_users, num_items = read_positives(a.data)
    model = NeuMF(num_users, num_items, a.mf_dim, [int(x) for x in a.layers.split(",")])
    params = sum(t.numel() for t in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)

    # One epoch's samples: each positive and `negatives` uniform items, shuffled.
    n_pos = len(pos_u)
    pos_u, pos_i = torch.from_numpy(pos_u.astype(np.int64)), torch.from_numpy(pos_i.astype(np.int64))
    users = torch.cat([pos_u] + [pos_u] * a.negatives)
    items = torch.cat([pos_i, torch.randint(0, num_items, (n_pos * a.negatives,))])
    labels = torch.cat([torch.ones(n_pos), torch.zeros(n_pos * a.negatives)])
    perm = torch.randperm(len(users))
    users, items, labels = users[perm], items[perm], labels[perm]
    steps_per_epoch = len(users) // a.batch_size
    steps = min(a.max_steps, steps_per_epoch)

    model.train()
    t0 = time.perf_counter()
    t1 = None
    for s in range(steps):
        if s == 1:
            t1 = time.perf_counter()
        sl = slice(s * a.batch_size, (s + 1) * a.batch_size)
        logits = model(users[sl], items[sl]).reshape(-1)
        loss = F.binary_cross_entropy_with_logits(logits, labels[sl])
        opt.zero_grad()
        loss.backward()
        opt.step()
    end = time.perf_counter()
    elapsed = end - t0
    print(f"loss {loss.item():.4f} after {steps} steps")
    if steps > 1:  # the steady rate: without the first step (warm-up), as report.json's step_split
        print(f"steady {(steps - 1) * a.batch_size / (end - t1):.1f} samples/s, {(end - t1) / (steps - 1) * 1000:.1f} ms per step")
    print(f"throughput {steps * a.batch_size / elapsed:.1f} samples/s ({a.threads} threads, batch {a.batch_size}, "
          f"{params} parameters, {elapsed / steps * 1000:.1f} ms per step)")


if __name__ == "__main__":
    main()
