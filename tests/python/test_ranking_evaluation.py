"""NCF's ranking evaluation (train::evaluate_ranking) against numpy and the MLPerf reference's own
per-user code: a dataset from `scaletrain-data synthetic --task recommendation`, a seeded NeuMF
evaluated by bin/scaletrain_ranking_helper on 1 and 2 ranks (each rank writes its scores, the
held-out item in column 0), then from those scores:
- numpy: rank = number of negatives scoring >= the held-out item; HR@k = mean(rank < k),
  NDCG@k = mean(1 / log2(rank + 2) where rank < k);
- the reference's eval_one (mlcommons/training, recommendation/pytorch/ncf.py): the negatives then
  the held-out item into a dict item -> score, heapq.nlargest(k, ...), hit = held-out in it,
  NDCG = log(2) / log(position + 2);
must give exactly scaletrain's hit count, and its NDCG sum to 1e-12 relative, at k = 10 and 1.
What the evaluation promises across runs: with the same users per forward, 1, 2 and 3 ranks give
bitwise the same scores, hits and NDCG (every user is scored in the same forward of the same shape,
whatever the rank count); another number of users per forward gives other GEMM shapes, which
oneDNN may round differently: scores within 1e-6 (a few float32 ulps of a probability) and the same
hits but for users whose held-out item ties a negative within that. Needs numpy and h5py only.
"""
import heapq
import math
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

ST_BIN = os.environ.get("ST_BIN", "build/bin")
ST_TMP = os.environ.get("ST_TMP", "/tmp/scaletrain-test")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
HELPER = os.path.join(ST_BIN, "scaletrain_ranking_helper")
DATA_TOOL = os.path.join(ST_BIN, "scaletrain-data")

root = os.path.join(ST_TMP, "ranking_evaluation")
shutil.rmtree(root, ignore_errors=True)
os.makedirs(root)
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.stdout


data = os.path.join(root, "data")
run([DATA_TOOL, "synthetic", "--task", "recommendation", "--users", "150", "--items", "800", "--groups", "10",
     "--positives-per-user", "12", "--eval-negatives", "99", "--seed", "4", "--output", data])
val_items, val_negs = [], []
for name in sorted(os.listdir(os.path.join(data, "val"))):
    if name.endswith(".h5"):
        with h5py.File(os.path.join(data, "val", name), "r") as f:
            val_items.append(f["item"][...])
            val_negs.append(f["negatives"][...])
val_items = np.concatenate(val_items)
val_negs = np.concatenate(val_negs)
users, K = val_negs.shape


def scaletrain(ranks, k, users_per_batch):
    prefix = os.path.join(root, f"np{ranks}-k{k}")
    cmd = [HELPER, data, prefix, "3", str(k), str(users_per_batch)]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), "--oversubscribe"] + cmd
    run(cmd)
    parts = []
    for r in range(ranks):
        with h5py.File(f"{prefix}.rank{r}.h5", "r") as f:
            parts.append((int(f["first_row"][0]), f["scores"][...]))
    parts.sort(key=lambda p: p[0])
    scores = np.concatenate([p[1] for p in parts])
    fields = open(prefix + ".metrics.txt").read().split()
    return scores, int(fields[0]), int(fields[1]), float(fields[2]), float(fields[3]), float(fields[4])


def numpy_metrics(scores, k):
    rank = (scores[:, 1:] >= scores[:, :1]).sum(axis=1)
    hit = rank < k
    return int(hit.sum()), float(np.where(hit, 1.0 / np.log2(rank + 2.0), 0.0).sum())


def reference_metrics(scores, k):
    """The reference's eval_one on the saved scores (items: the negatives, then the held-out)."""
    hits, ndcg = 0, 0.0
    for u in range(scores.shape[0]):
        items = [int(i) for i in val_negs[u]] + [int(val_items[u])]
        preds = [float(p) for p in scores[u, 1:]] + [float(scores[u, 0])]
        score_of = {item: pred for item, pred in zip(items, preds)}
        ranked = heapq.nlargest(k, score_of, key=score_of.get)
        if int(val_items[u]) in ranked:
            hits += 1
            ndcg += math.log(2) / math.log(ranked.index(int(val_items[u])) + 2)
    return hits, ndcg


def near_ties(scores, tol):
    """Users whose held-out score is within tol of a negative's: their rank may differ by shape."""
    return int((np.abs(scores[:, 1:] - scores[:, :1]) <= tol).any(axis=1).sum())


for k in (10, 1):
    s1, n1, h1, sum1, hr1, nd1 = scaletrain(1, k, 16)
    check(s1.shape == (users, K + 1), f"k={k}: scores of {s1.shape[0]} users x {s1.shape[1]} items")
    for ranks in (2, 3):
        s2, n2, h2, sum2, _, _ = scaletrain(ranks, k, 16)
        check(np.array_equal(s1, s2) and h2 == h1 and sum2 == sum1 and n2 == users,
              f"k={k}: 1 and {ranks} ranks, 16 users per forward: bitwise the same scores, hits and NDCG")
    s7, n7, h7, sum7, _, _ = scaletrain(2, k, 7)
    tol = 1e-6
    ties = near_ties(s1, tol)
    worst = float(np.abs(s7 - s1).max())
    check(worst <= tol, f"k={k}: 7 users per forward on 2 ranks: scores within {tol:g} of 16 per forward (largest {worst:.2e})")
    check(abs(h7 - h1) <= ties and n7 == users,
          f"k={k}: 7 users per forward: hits {h7} vs {h1}, {ties} user(s) with a near tie")
    check(n1 == users, f"k={k}: every user evaluated once ({n1} of {users})")
    nh, ns = numpy_metrics(s1, k)
    rh, rs = reference_metrics(s1, k)
    print(f"k={k}: scaletrain HR {hr1:.4f} NDCG {nd1:.4f}; numpy HR {nh / users:.4f} NDCG {ns / users:.4f}; "
          f"reference HR {rh / users:.4f} NDCG {rs / users:.4f}")
    check(0 < h1 < users, f"k={k}: hits {h1} of {users} (neither none nor all, so the test can fail)")
    check(h1 == nh == rh, f"k={k}: hits scaletrain {h1}, numpy {nh}, reference {rh}")
    check(abs(sum1 - ns) <= 1e-12 * max(1.0, ns) and abs(sum1 - rs) <= 1e-12 * max(1.0, rs),
          f"k={k}: NDCG sums {sum1!r} {ns!r} {rs!r}")
    check(abs(hr1 - h1 / users) < 1e-15 and abs(nd1 - sum1 / users) < 1e-15, f"k={k}: HR and NDCG are the means")

# Ties: scores equal to the held-out item's count against it, in numpy as in the reference.
tied = s1.copy()
tied[:, 1:4] = tied[:, :1]
th, _ = numpy_metrics(tied, 3)
rh, _ = reference_metrics(tied, 3)
check(th == rh == 0, f"three negatives tied with the held-out item: no hit at k=3 (numpy {th}, reference {rh})")

shutil.rmtree(root, ignore_errors=True)
if failures:
    sys.exit(f"{len(failures)} check(s) failed")
print("all checks passed")
