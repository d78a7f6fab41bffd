#!/usr/bin/env bash
# The input pipeline from the command line (issue 4): training with --stage-to on 2 and 4 ranks
# as 2 emulated nodes (one copying rank per node, staged shards verified, report.json's data and
# staging fields), a re-run reusing the staged copies, a corrupted staged copy detected and copied
# again, the mmap and MPI-IO readers (each training to exactly the weights of the posix run),
# reading ahead across epochs (3 epochs, posix and mpiio-collective: the weights of a run without it),
# `scaletrain-data bench` (table and --json keys), and bad options giving clear errors.
# Env (set by ctest): ST_BIN (build/bin), ST_TMP (scratch).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

W=$TMP_ROOT/data_pipeline
rm -rf "$W"
mkdir -p "$W"
MPIRUN=(timeout 120 mpirun --oversubscribe)
TRAIN=(train --model resnet20 --epochs 1 --batch-size 8 --threads 1 --log-every 0 --ranks-per-node 2)

"$BIN/scaletrain-data" synthetic --samples 96 --val-samples 32 --image-size 16,16,3 --classes 4 --shards 4 \
  --output "$W/data" >/dev/null

# check_report FILE RANKS: the data and staging fields exist with sane values, and at most one
# rank per node (ranks 0 and 2 with --ranks-per-node 2) copied anything.
check_report() {
  $PY - "$1" "$2" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); ranks = int(sys.argv[2])
c = r["config"]
assert c["io"] == "posix" and c["data_threads"] == 2 and c["stage_to"], c
d = r["data"]
assert d["io"] == "posix" and d["data_threads"] == 2, d
for k in ("wait_total_s", "wait_per_step_s", "wait_fraction", "bytes_read", "read_mb_per_s"):
    s = d[k]
    assert 0 <= s["min"] <= s["mean"] <= s["max"], (k, s)
assert d["steps"] == r["steps"] > 0, d
# Every rank read its samples: 96 // ranks // 8 batches of 8 images of 16*16*3 bytes at least.
assert len(d["per_rank_bytes_read"]) == ranks
assert min(d["per_rank_bytes_read"]) >= r["steps"] * 8 * 16 * 16 * 3, d
assert d["wait_per_step_s"]["max"] < 5, d
st = r["staging"]
assert st is not None
for split in ("train", "val"):
    per = st[split]["per_rank_bytes"]
    assert len(per) == ranks
    copiers = [i for i, b in enumerate(per) if b > 0]
    assert all(i % 2 == 0 for i in copiers), (split, per)  # only local rank 0 of a node copies
    assert st[split]["seconds"]["min"] >= 0 and st[split]["shards"] >= 1, st[split]
    assert st[split]["dir"].endswith("/" + split), st[split]
print("report ok:", ranks, "ranks, staging per-rank bytes", st["train"]["per_rank_bytes"])
EOF
}

for np in 2 4; do
  echo "== train --stage-to on $np ranks (2 emulated nodes when 4)"
  stage=$W/stage$np
  # Given as $ST_STAGE_ROOT/stageN: expanded by scaletrain, as a per-node $TMPDIR would be.
  out=$(ST_STAGE_ROOT=$W "${MPIRUN[@]}" -x ST_STAGE_ROOT -np $np "$BIN/scaletrain" "${TRAIN[@]}" --data "$W/data" \
    --output-dir "$W/run$np" --stage-to "\$ST_STAGE_ROOT/stage$np" --data-threads 2 --prefetch 2 2>&1) ||
    fail "training with --stage-to on $np ranks: $out"
  grep -q "staged train: 4 shards to $stage/train" <<<"$out" || fail "no staging line: $out"
  [ "$(ls "$stage/train" | wc -l)" -eq 4 ] || fail "expected 4 staged train shards: $(ls "$stage/train")"
  ls "$stage/train" | grep -q tmp && fail "temporary files left in $stage/train"
  for f in "$W"/data/train/*.h5; do cmp -s "$f" "$stage/train/$(basename "$f")" || fail "staged copy of $f differs"; done
  check_report "$W/run$np/report.json" $np
done

echo "== a re-run keeps the valid staged copies; a corrupted one is copied again"
# Flip a byte in the middle of one staged shard, inside the image data (the file keeps its size).
$PY - "$W/stage2/train/shard-00001-of-00004.h5" <<'EOF'
import sys
p = sys.argv[1]
with open(p, "r+b") as f:
    n = f.seek(0, 2) // 2; f.seek(n); b = f.read(1); f.seek(n); f.write(bytes([b[0] ^ 0xFF]))
EOF
out=$("${MPIRUN[@]}" -np 2 "$BIN/scaletrain" "${TRAIN[@]}" --data "$W/data" --output-dir "$W/rerun" \
  --stage-to "$W/stage2" --data-threads 2 --skip-bad-samples 2>&1) || fail "re-run: $out"
grep -qF "shard-00001-of-00004.h5 does not match" <<<"$out" || fail "corruption not reported: $out"
grep -qF "1 copies" <<<"$out" || fail "expected exactly one train shard copied again: $out"
cmp -s "$W/data/train/shard-00001-of-00004.h5" "$W/stage2/train/shard-00001-of-00004.h5" || fail "not re-copied"
$PY -c "
import json, sys
d = json.load(open(sys.argv[1]))['data']
assert d['skipped_samples'] == 0 and d['per_rank_skipped_samples'] == [0, 0], d
" "$W/rerun/report.json"
$PY -c "import json,sys; assert json.load(open(sys.argv[1]))['data']['skipped_samples'] is None" "$W/run2/report.json"
echo "ok: corrupted staged copy detected and replaced; skipped_samples 0 with --skip-bad-samples, null without"

echo "== mmap and MPI-IO readers: the same batches, so the same weights as posix (run2)"
for io in mmap mpiio mpiio-collective; do
  out=$("${MPIRUN[@]}" -np 2 "$BIN/scaletrain" "${TRAIN[@]}" --data "$W/data" --output-dir "$W/run_$io" \
    --io $io 2>&1) || fail "train --io $io: $out"
  $PY - "$W/run_$io" "$W/run2" $io <<'EOF' || fail "train --io $io differs from posix"
import json, sys
import h5py, numpy as np
run, ref, io = sys.argv[1:4]
r = json.load(open(run + "/report.json"))
assert r["data"]["io"] == io, r["data"]
latest = lambda d: d + "/checkpoints/" + open(d + "/checkpoints/latest").read().strip()
a, b = h5py.File(latest(run), "r"), h5py.File(latest(ref), "r")
names = sorted(a["model"].keys())
assert names == sorted(b["model"].keys()) and names, names
for n in names:
    assert np.array_equal(a["model"][n][()], b["model"][n][()]), (io, n)
EOF
  echo "ok: train --io $io (weights identical to posix)"
done

echo "== reading ahead across epochs: the same batches, so the same weights as without it"
# The training loader reads the next epoch's first batches before its start (data/loader.hpp);
# SCALETRAIN_LOADER_READ_AHEAD=0 turns that off. mpiio-collective never reads ahead, and must
# still keep its collective reads in step over several epochs.
TRAIN3=(train --model resnet20 --epochs 3 --batch-size 8 --threads 1 --log-every 0 --ranks-per-node 2)
for io in posix mpiio-collective; do
  for ahead in 1 0; do
    out=$(SCALETRAIN_LOADER_READ_AHEAD=$ahead "${MPIRUN[@]}" -np 2 "$BIN/scaletrain" "${TRAIN3[@]}" \
      --data "$W/data" --output-dir "$W/ahead_${io}_$ahead" --io $io 2>&1) || fail "train --io $io, read ahead $ahead: $out"
  done
  $PY - "$W/ahead_${io}_1" "$W/ahead_${io}_0" <<'EOF' || fail "--io $io: reading ahead changed the weights"
import sys
import h5py, numpy as np
latest = lambda d: d + "/checkpoints/" + open(d + "/checkpoints/latest").read().strip()
a, b = h5py.File(latest(sys.argv[1]), "r"), h5py.File(latest(sys.argv[2]), "r")
names = sorted(a["model"].keys())
assert names == sorted(b["model"].keys()) and names, names
for n in names:
    assert np.array_equal(a["model"][n][()], b["model"][n][()]), n
EOF
  echo "ok: train --io $io, 3 epochs: weights identical with and without reading ahead"
done

echo "== bench"
out=$(timeout 60 mpirun -np 2 "$BIN/scaletrain-data" bench "$W/data" --batch-size 8 --data-threads 2 \
  --json "$W/bench.json" 2>&1) || fail "bench: $out"
grep -qF "samples/s" <<<"$out" && grep -qF "raw_read_MB/s" <<<"$out" && grep -qF "total" <<<"$out" ||
  fail "bench table: $out"
$PY - "$W/bench.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
for k in ("samples_per_s", "mb_per_s", "raw_read_mb_per_s"):
    assert j[k] > 0, (k, j[k])
assert j["ranks"] == 2 and len(j["per_rank"]) == 2 and j["samples"] == 96, j
assert all(r["samples_per_s"] > 0 and r["raw_read_mb_per_s"] > 0 for r in j["per_rank"]), j
assert j["first_epoch_mb_per_s"] > 0 and j["later_epochs_mb_per_s"] is None, j  # one epoch
print("bench json ok")
EOF
out=$(timeout 60 mpirun -np 2 "$BIN/scaletrain-data" bench "$W/data" --batch-size 8 --io mmap --augment --epochs 2 \
  --json "$W/bench_mmap.json" 2>&1) || fail "bench --io mmap: $out"
grep -qF "later epochs:" <<<"$out" || fail "bench --epochs 2 prints no first/later epoch line: $out"
$PY - "$W/bench_mmap.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["io"] == "mmap" and j["samples"] == 2 * 96 and j["epochs"] == 2, j
assert j["first_epoch_mb_per_s"] > 0 and j["later_epochs_mb_per_s"] > 0 and j["later_epochs_over_raw"] > 0, j
print("bench --io mmap json ok")
EOF

echo "== bad options"
T=("$BIN/scaletrain" "${TRAIN[@]}" --data "$W/data" --output-dir "$W/bad")
expect_failure "--io" "unknown --io 'nfs'" "${T[@]}" --io nfs
expect_failure "--shuffle" "unknown --shuffle 'random'" "${T[@]}" --shuffle random
expect_failure "--shuffle-buffer" "--shuffle-buffer 0 is out of range: allowed 1 to" "${T[@]}" --shuffle-buffer 0
expect_failure "--data-threads" "--data-threads 0 is out of range: allowed 1 to 256" "${T[@]}" --data-threads 0
expect_failure "--image-size" "--image-size '224'" "${T[@]}" --image-size 224
expect_failure "--prefetch" "--prefetch 0 is out of range: allowed 1 to 64 batches" "${T[@]}" --prefetch 0
expect_failure "--stage-to unset variable" "environment variable ST_NO_SUCH_VAR is not set" "${T[@]}" \
  --stage-to '${ST_NO_SUCH_VAR}/x'
expect_failure "eval --io" "unknown --io 'x'" "$BIN/scaletrain" eval --model resnet20 --checkpoint "$W/run2" \
  --data "$W/data" --io x
expect_failure "bench --io" "unknown --io 'x'" "$BIN/scaletrain-data" bench "$W/data" --io x
touch "$W/not-a-dir"
expect_failure "--stage-to a file" "not-a-dir" "${MPIRUN[@]}" -np 2 "${T[@]}" --stage-to "$W/not-a-dir"
echo "all data pipeline tests passed"
