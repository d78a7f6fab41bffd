#!/usr/bin/env bash
# scaletrain-data for the recommendation task, end to end: `convert movielens` on small ml-20m-style
# (ratings.csv) and ml-1m-style (ratings.dat) files written here, checked with h5py against
# expectations computed independently in Python (dense ids in order of original id, held-out =
# latest interaction with ties to the later line, negatives distinct and never a positive); one
# process and two ranks giving the same data; `synthetic --task recommendation` with its planted
# group structure measured in numpy (a group-aware popularity ranking far above chance); inspect,
# also of a dataset written with h5py as docs/dataset-format.md shows; `upgrade` (mpirun -np 2) of
# train and val shards written with h5py's default format (superblock 0, metadata without
# checksums) and of a converted dataset: superblock >= 2 after, every dataset and attribute equal,
# no `checksum` attribute, inspect lists no unchecked shard, verify passes, a bad id is named;
# and the error cases (no ratings file, a malformed line named by file:line, an empty file, more
# evaluation negatives than non-positive items).
# Env (set by ctest): ST_BIN (build/bin), ST_SOURCE (repository), ST_TMP (scratch).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

DATA=$BIN/scaletrain-data
W=$TMP_ROOT/recommendation_data
MPIRUN=(mpirun --oversubscribe -np 2)
rm -rf "$W"
mkdir -p "$W"

expect_in() {
  local text=$1
  shift
  for needle in "$@"; do grep -qF -- "$needle" <<<"$text" || fail "expected '$needle' in: $text"; done
}

echo "== help"
expect_in "$("$DATA" convert movielens --help)" "--source" "--eval-negatives" "--seed" "--shards"
expect_in "$("$DATA" synthetic --task recommendation --help)" "--users" "--items" "--groups" "--positives-per-user"
expect_in "$("$DATA" synthetic --task=recommendation --help)" "--users" "--eval-negatives"
expect_in "$("$DATA" --help)" "convert movielens" "--task recommendation"

echo "== convert movielens, ml-20m layout (ratings.csv)"
# Users 5, 12, 40, 77 -> 0..3; items 2, 7, 9, 11, 13, 55, 100, 300 -> 0..7 (sorted by original id).
# User 12: 55 and 7 share the latest timestamp, 55's line is later -> 55 held out. User 40 has a
# single rating (held out, nothing to train on). User 5 rated 2 latest although not last in the file.
mkdir -p "$W/ml20"
cat >"$W/ml20/ratings.csv" <<'EOF'
userId,movieId,rating,timestamp
12,100,4.0,50
5,300,3.5,10
12,7,5.0,60
5,9,1.0,20
40,7,2.0,5
77,11,4.0,1
12,55,3.0,60
5,2,4.5,30
77,100,4.0,3
77,13,0.5,2
EOF
out=$("$DATA" convert movielens --source "$W/ml20" --output "$W/ml20-out" --eval-negatives 4 --seed 3)
expect_in "$out" "4 users, 8 items, 6 positives" "4 held-out positives (one per user), 4 negatives per user" \
  "1 users have a single interaction"

# Independent expectations from the text itself.
check_movielens() { # SOURCE_FILE SEPARATOR OUTPUT_DIR K [HELD-OUT,... worked out by hand]
  $PY - "$@" <<'EOF'
import glob, sys, h5py, numpy as np
src, sep, out, k = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
by_hand = [int(x) for x in sys.argv[5].split(",")] if len(sys.argv) > 5 else None
lines = [l for l in open(src).read().splitlines() if l.strip()]
if sep == ",":
    lines = lines[1:]
rows = [(int(a), int(b), int(d), n) for n, (a, b, c, d) in enumerate(l.split(sep) for l in lines)]
users = sorted({r[0] for r in rows}); items = sorted({r[1] for r in rows})
uid = {u: i for i, u in enumerate(users)}; iid = {m: i for i, m in enumerate(items)}
latest = {}
for u, m, t, n in rows:
    if u not in latest or (t, n) > latest[u][0]:
        latest[u] = ((t, n), m)
want_heldout = [iid[latest[u][1]] for u in users]
positives = {uid[u]: set() for u in users}
for u, m, t, n in rows:
    positives[uid[u]].add(iid[m])
want_train = sorted((uid[u], iid[m]) for u, m, t, n in rows if m != latest[u][1])

def load(split, names):
    shards = sorted(glob.glob(f"{out}/{split}/*.h5"))
    cols = {n: [] for n in names}
    for p in shards:
        with h5py.File(p, "r") as f:
            assert f.attrs["task"].decode() == "recommendation", p
            assert f.attrs["scaletrain_format"] == 2 and f.attrs["num_users"] == len(users), p
            assert f.attrs["num_items"] == len(items), p
            for n in names:
                assert f[n].dtype == np.int32, (p, n, f[n].dtype)
                cols[n].append(f[n][()])
    return [np.concatenate(cols[n]) for n in names]

tu, ti = load("train", ["user", "item"])
assert sorted(zip(tu.tolist(), ti.tolist())) == want_train, (list(zip(tu, ti)), want_train)
vu, vi, vn = load("val", ["user", "item", "negatives"])
assert vu.tolist() == list(range(len(users))), vu
assert vi.tolist() == want_heldout, (vi, want_heldout)
assert by_hand is None or by_hand == want_heldout, (by_hand, want_heldout)
assert vn.shape == (len(users), k), vn.shape
for u in range(len(users)):
    row = vn[u].tolist()
    assert len(set(row)) == k, f"user {u}: repeated negatives {row}"
    assert not set(row) & positives[u], f"user {u}: negatives {row} include positives {positives[u]}"
    assert all(0 <= x < len(items) for x in row), row
print(f"ok: {src}: {len(users)} users, {len(items)} items, held-out {want_heldout}, train {len(want_train)}")
EOF
}
# The hand-worked held-out items too: users 5, 12, 40, 77 hold out 2, 55, 7, 100 (dense 0, 5, 1, 6).
check_movielens "$W/ml20/ratings.csv" , "$W/ml20-out" 4 0,5,1,6

echo "== convert movielens, ml-1m layout (ratings.dat), one process and two ranks"
mkdir -p "$W/ml1"
$PY - "$W/ml1/ratings.dat" <<'EOF'
import random, sys
random.seed(1)
with open(sys.argv[1], "w") as f:
    for u in (3, 1, 8, 20, 6):
        for m in random.sample(range(1, 60, 2), 12):
            f.write(f"{u}::{m}::{random.randint(1, 5)}::{978300000 + random.randint(0, 5)}\n")
EOF
"$DATA" convert movielens --source "$W/ml1" --output "$W/ml1-a" --shards 3 --eval-negatives 10 >/dev/null
"${MPIRUN[@]}" "$DATA" convert movielens --source "$W/ml1" --output "$W/ml1-b" --shards 3 --eval-negatives 10 >/dev/null
check_movielens "$W/ml1/ratings.dat" :: "$W/ml1-a" 10
$PY - "$W/ml1-a" "$W/ml1-b" <<'EOF'
import glob, os, sys, h5py, numpy as np
a, b = sys.argv[1:]
shards = sorted(os.path.relpath(p, a) for p in glob.glob(f"{a}/*/*.h5"))
assert shards == sorted(os.path.relpath(p, b) for p in glob.glob(f"{b}/*/*.h5")) and len(shards) == 6, shards
for s in shards:
    with h5py.File(f"{a}/{s}", "r") as fa, h5py.File(f"{b}/{s}", "r") as fb:
        assert sorted(fa) == sorted(fb), s
        for d in fa:
            assert np.array_equal(fa[d][()], fb[d][()]), f"{s}/{d} differs between 1 and 2 ranks"
EOF
"$DATA" verify "$W/ml1-b" >/dev/null || fail "verify of a converted dataset failed"
echo "ok: 1 and 2 ranks wrote the same data; verify passes"

echo "== inspect"
out=$("$DATA" inspect "$W/ml20-out")
expect_in "$out" "split train: task recommendation, 4 users, 8 items, 6 positives in 1 shard" \
  "split val: task recommendation" "4 negatives per user" "manifest $W/ml20-out/train/manifest.json"
"$DATA" inspect "$W/ml1-a" --json | $PY -c "
import json, sys; j = json.load(sys.stdin)['splits']
assert j['train']['task'] == 'recommendation' and j['train']['positives'] == 55, j['train']
assert j['val']['negatives_per_user'] == 10 and j['val']['rows'] == 5 and len(j['val']['shards']) == 3, j['val']"
echo "ok: inspect"

echo "== a dataset written with h5py (docs/dataset-format.md's example) is read"
$PY - "$W/h5py" <<'EOF'
import os, sys, h5py, numpy as np
d = sys.argv[1]
for split in ("train", "val"):
    os.makedirs(f"{d}/{split}")
with h5py.File(f"{d}/train/shard-00000-of-00001.h5", "w") as f:
    f.attrs.update(scaletrain_format=2, task="recommendation", num_users=3, num_items=6)  # vlen str, int64
    f.create_dataset("user", data=np.asarray([0, 1, 1, 2], "int32"))
    f.create_dataset("item", data=np.asarray([0, 1, 2, 3], "int32"))
with h5py.File(f"{d}/val/shard-00000-of-00001.h5", "w") as f:
    f.attrs.update(scaletrain_format=2, task=np.bytes_("recommendation"), num_users=3, num_items=6)
    f.create_dataset("user", data=np.arange(3, dtype="int32"))
    f.create_dataset("item", data=np.asarray([5, 4, 0], "int32"))
    f.create_dataset("negatives", data=np.asarray([[1, 2], [0, 3], [4, 5]], "int32"))
with h5py.File(f"{d}/bad.h5", "w") as f:  # numpy's default int64 ids: refused with the fix
    f.attrs.update(scaletrain_format=2, task="recommendation", num_users=3, num_items=6)
    f.create_dataset("user", data=np.asarray([0, 1]))
    f.create_dataset("item", data=np.asarray([0, 1], "int32"))
EOF
expect_in "$("$DATA" inspect "$W/h5py")" "split train: task recommendation, 3 users, 6 items, 4 positives in 1 shard" \
  "split val: task recommendation, 3 users, 6 items, 3 held-out positives (one per user), 2 negatives per user"
mkdir -p "$W/h5py-bad/train" && mv "$W/h5py/bad.h5" "$W/h5py-bad/train/shard-00000-of-00001.h5"
expect_failure "int64 ids" "dataset 'user' has dtype int64, expected int32 [N] (convert with .astype('int32'))" \
  "$DATA" inspect "$W/h5py-bad"

echo "== upgrade gives shards written with h5py's default format checksummed metadata"
# train/ in two shards (one with big-endian ids), val/ in one; h5py's default libver writes
# superblock 0, whose HDF5 metadata has no checksums.
$PY - "$W/rec-old" <<'EOF'
import os, sys, h5py, numpy as np
d = sys.argv[1]
for split in ("train", "val"):
    os.makedirs(f"{d}/{split}")
rng = np.random.default_rng(3)
U, I, K = 7, 40, 5
for s, n, order in ((0, 9, "<i4"), (1, 6, ">i4")):
    with h5py.File(f"{d}/train/shard-{s:05d}-of-00002.h5", "w") as f:
        f.attrs.update(scaletrain_format=2, task="recommendation", num_users=U, num_items=I)
        f.create_dataset("user", data=rng.integers(0, U, n).astype(order))
        f.create_dataset("item", data=rng.integers(0, I - K - 1, n).astype(order))
with h5py.File(f"{d}/val/shard-00000-of-00001.h5", "w") as f:
    f.attrs.update(scaletrain_format=2, task=np.bytes_("recommendation"), num_users=U, num_items=I)
    f.create_dataset("user", data=np.arange(U, dtype="int32"))
    f.create_dataset("item", data=np.full(U, I - 1, "int32"))
    f.create_dataset("negatives", data=(I - 2 - (np.arange(U * K) % K)).reshape(U, K).astype("int32"))
EOF
"${MPIRUN[@]}" "$DATA" upgrade "$W/rec-old" --output "$W/rec-new" >"$W/rec-upgrade.txt" ||
  fail "upgrade of a recommendation dataset: $(cat "$W/rec-upgrade.txt")"
expect_in "$(cat "$W/rec-upgrade.txt")" "split train: task recommendation, 15 positives in 2 shards" \
  "split val: task recommendation, 7 evaluation rows in 1 shard"
# A dataset scaletrain wrote (already checksummed) is rewritten the same way, on one process.
"$DATA" upgrade "$W/ml20-out" --output "$W/ml20-up" >/dev/null || fail "upgrade of a converted dataset"
check_upgraded() { # OLD NEW SUPERBLOCK-BEFORE
  PYTHONPATH="$(dirname "$0")" $PY - "$@" <<'EOF'
import glob, os, sys, h5py, numpy as np
old, new, before = sys.argv[1], sys.argv[2], int(sys.argv[3])
from hdf5_superblock import superblock  # tests/cli/hdf5_superblock.py
names = sorted(os.path.relpath(p, old) for p in glob.glob(f"{old}/*/*.h5"))
assert names == sorted(os.path.relpath(p, new) for p in glob.glob(f"{new}/*/*.h5")) and names, names
for name in names:
    a, b = f"{old}/{name}", f"{new}/{name}"
    assert superblock(a) == before, (a, superblock(a))
    assert superblock(b) >= 2, (b, superblock(b))
    with h5py.File(a, "r") as f, h5py.File(b, "r") as g:
        assert sorted(f) == sorted(g), (b, sorted(g))
        for k in f:
            assert g[k].dtype == np.dtype("<i4") and np.array_equal(f[k][()], g[k][()]), (b, k)
        for k in ("num_users", "num_items", "scaletrain_format"):
            assert f.attrs[k] == g.attrs[k], (b, k, f.attrs[k], g.attrs[k])
        assert g.attrs["task"] == b"recommendation" and "checksum" not in g.attrs, (b, dict(g.attrs))
print(f"ok: {new}: {len(names)} shards, superblock {before} -> >= 2, every dataset and attribute equal")
EOF
}
check_upgraded "$W/rec-old" "$W/rec-new" 0
check_upgraded "$W/ml20-out" "$W/ml20-up" 3
expect_in "$("$DATA" inspect "$W/rec-old")" "unchecked: 2 shards have" "unchecked: 1 shard has"
out=$("$DATA" inspect "$W/rec-new") || fail "inspect of the upgraded dataset: $out"
! grep -q "unchecked:" <<<"$out" || fail "upgraded shards still unchecked: $out"
"$DATA" inspect "$W/rec-new" --require-checksums >/dev/null || fail "inspect --require-checksums of the upgraded dataset"
"$DATA" verify "$W/rec-new" >/dev/null || fail "verify of the upgraded dataset (upgrade writes manifests)"
mkdir -p "$W/rec-bad/train" && cp "$W/rec-old/train/shard-00000-of-00002.h5" "$W/rec-bad/train/"
$PY -c "
import sys, h5py
with h5py.File(sys.argv[1], 'r+') as f:
    f['item'][3] = 40" "$W/rec-bad/train/shard-00000-of-00002.h5"
expect_failure "upgrade of an id out of range" \
  "$W/rec-bad/train/shard-00000-of-00002.h5: item[3] = 40 is out of range [0, 40)" \
  "$DATA" upgrade "$W/rec-bad" --output "$W/rec-bad-up"
echo "ok: upgrade of recommendation shards"

echo "== errors"
mkdir -p "$W/empty-dir"
expect_failure "no ratings file" "$W/empty-dir: neither ratings.csv" \
  "$DATA" convert movielens --source "$W/empty-dir" --output "$W/x"
mkdir -p "$W/bad"
printf 'userId,movieId,rating,timestamp\n1,2,3.0,10\n1,2;3.0,11\n' >"$W/bad/ratings.csv"
expect_failure "malformed line" "$W/bad/ratings.csv:3: malformed rating '1,2;3.0,11'" \
  "$DATA" convert movielens --source "$W/bad" --output "$W/x"
mkdir -p "$W/bad1m"
printf '1::2::3::10\n1::2::3\n' >"$W/bad1m/ratings.dat"
expect_failure "malformed ml-1m line" "$W/bad1m/ratings.dat:2: malformed rating" \
  "$DATA" convert movielens --source "$W/bad1m" --output "$W/x"
mkdir -p "$W/emptyfile"
: >"$W/emptyfile/ratings.dat"
expect_failure "empty ratings file" "$W/emptyfile/ratings.dat: holds no ratings" \
  "$DATA" convert movielens --source "$W/emptyfile" --output "$W/x"
expect_failure "too many negatives for the items" "--eval-negatives 999 is more than the 7 non-positive items" \
  "$DATA" convert movielens --source "$W/ml20" --output "$W/x"
expect_failure "a user with too few non-positives" "user 0 has 3 positives of 8 items, leaving 5 non-positive items" \
  "$DATA" convert movielens --source "$W/ml20" --output "$W/x" --eval-negatives 6
expect_failure "refuses to mix shards" "already holds shards" \
  "$DATA" convert movielens --source "$W/ml20" --output "$W/ml20-out" --eval-negatives 4
expect_failure "too many positives per user" "--positives-per-user 200 is out of range" \
  "$DATA" synthetic --task recommendation --users 10 --items 1000 --groups 10 --positives-per-user 200 --output "$W/x"
expect_failure "image reader on a recommendation split" "recommendation" \
  "$BIN/scaletrain-data" bench "$W/ml20-out"

echo "== synthetic --task recommendation: the planted groups are there"
out=$("$DATA" synthetic --task recommendation --users 300 --items 2000 --groups 10 --positives-per-user 20 \
  --shards 3 --seed 5 --output "$W/syn")
expect_in "$out" "300 users, 2000 items, 5700 positives in 3 shards" "999 negatives per user"
"${MPIRUN[@]}" "$DATA" synthetic --task recommendation --users 300 --items 2000 --groups 10 --positives-per-user 20 \
  --shards 3 --seed 5 --output "$W/syn2" >/dev/null
$PY - "$W/syn" "$W/syn2" <<'EOF'
import glob, sys, h5py, numpy as np
G, I, K = 10, 2000, 999
def load(d, split, names):
    cols = {n: [] for n in names}
    for p in sorted(glob.glob(f"{d}/{split}/*.h5")):
        with h5py.File(p, "r") as f:
            for n in names:
                cols[n].append(f[n][()])
    return [np.concatenate(cols[n]) for n in names]
tu, ti = load(sys.argv[1], "train", ["user", "item"])
vu, vi, vn = load(sys.argv[1], "val", ["user", "item", "negatives"])
for a, b in zip((tu, ti, vu, vi, vn), load(sys.argv[2], "train", ["user", "item"]) + load(sys.argv[2], "val", ["user", "item", "negatives"])):
    assert np.array_equal(a, b), "2 ranks wrote different data"
U = len(vu)
assert U == 300 and vn.shape == (U, K)
majority, frac = np.zeros(U, int), np.zeros(U)
for u in range(U):
    c = np.bincount(ti[tu == u] % G, minlength=G)
    majority[u], frac[u] = c.argmax(), c.max() / c.sum()
    pos = set(ti[tu == u].tolist()) | {int(vi[u])}
    assert not pos & set(vn[u].tolist()) and len(set(vn[u].tolist())) == K, f"user {u}: bad negatives"
assert frac.mean() >= 0.8, f"mean in-group fraction {frac.mean():.3f} < 0.8"
assert (majority == np.arange(U) % G).mean() >= 0.95, "majority group is not the planted one"
heldout_in_group = (vi % G == majority).mean()
assert heldout_in_group >= 0.8, f"held-out in the user's group for {heldout_in_group:.3f} < 0.8"
# HR@10 of "popular within the user's group": ties counted against the held-out item.
pop = np.bincount(ti, minlength=I).astype(float)
hits = 0
for u in range(U):
    cands = np.concatenate([[vi[u]], vn[u]])
    score = (cands % G == majority[u]) * 1e9 + pop[cands]
    rank = (score[1:] >= score[0]).sum()
    hits += rank < 10
hr = hits / U
print(f"ok: in-group fraction {frac.mean():.3f}, held-out in group {heldout_in_group:.3f}, "
      f"HR@10 popularity-in-group {hr:.3f} (chance {10 / (K + 1):.3f})")
assert hr >= 0.15, f"HR@10 {hr:.3f} is not far above chance"
EOF
echo "PASS"
