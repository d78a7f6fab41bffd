#!/usr/bin/env bash
# Input-pipeline benchmark for docs/performance.md (issue 4, section 9):
#  (a) scaletrain-data bench on a raw dataset over 1 GB in the page cache: pipeline MB/s against
#      the raw sequential read bandwidth of the same files, measured in the same run, for 1 and 2
#      ranks and 1 and 2 data threads, REPEATS runs each; prints per-run ratios and medians.
#  (b) resnet50 training on CPU (2 ranks): data wait as a fraction of training time, from
#      report.json (data.wait_fraction.max), REPEATS runs.
# Usage: tools/bench_data.sh [WORKDIR]   (default /tmp/scaletrain-bench-data)
# Env: REPEATS (3), SAMPLES (7000: 7000 x 224x224x3 = 1.05 GB), STEPS (16), SKIP_TRAIN=1.
set -euo pipefail
BIN=${ST_BIN:-build/bin}
W=${1:-/tmp/scaletrain-bench-data}
REPEATS=${REPEATS:-3}
SAMPLES=${SAMPLES:-7000}
STEPS=${STEPS:-16}
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
mkdir -p "$W"
D=$W/raw224
if [ ! -d "$D/train" ]; then
  "$BIN/scaletrain-data" synthetic --samples "$SAMPLES" --val-samples 64 --image-size 224,224,3 --classes 100 \
    --shards 8 --output "$D" >/dev/null
fi
du -sh "$D/train"
cat "$D"/train/*.h5 >/dev/null  # into the page cache
echo "load: $(uptime)"

echo "== (a) pipeline vs raw read, $REPEATS runs each"
for np in 1 2; do
  for t in 1 2; do
    for i in $(seq "$REPEATS"); do
      mpirun --oversubscribe -np $np "$BIN/scaletrain-data" bench "$D" --batch-size 64 --data-threads $t \
        --json "$W/bench_np${np}_t${t}_$i.json" >/dev/null
    done
    $PY - "$W" $np $t "$REPEATS" <<'EOF'
import json, statistics, sys
w, np_, t, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
runs = [json.load(open(f"{w}/bench_np{np_}_t{t}_{i}.json")) for i in range(1, n + 1)]
med = lambda k: statistics.median(r[k] for r in runs)
ratios = [r["mb_per_s"] / r["raw_read_mb_per_s"] for r in runs]
reader = [r["reader_mb_per_s"] / r["raw_read_mb_per_s"] for r in runs]
print(f"ranks {np_} data-threads {t}: samples/s {med('samples_per_s'):.0f}, pipeline {med('mb_per_s'):.0f} MB/s, "
      f"raw read {med('raw_read_mb_per_s'):.0f} MB/s, ratio median {statistics.median(ratios):.3f} "
      f"(min {min(ratios):.3f}, max {max(ratios):.3f}); read stage alone / raw median {statistics.median(reader):.3f} "
      f"(min {min(reader):.3f}, max {max(reader):.3f})")
EOF
  done
done
echo "load: $(uptime)"

[ "${SKIP_TRAIN:-0}" = 1 ] && exit 0
echo "== (b) resnet50 training, 2 ranks, batch 4 per rank, $STEPS steps, $REPEATS runs"
for i in $(seq "$REPEATS"); do
  mpirun -np 2 "$BIN/scaletrain" train --model resnet50 --data "$D" --batch-size 4 --max-steps "$STEPS" \
    --base-lr 0.001 --threads 1 --data-threads 1 --log-every 0 --output-dir "$W/r50_$i" >/dev/null
done
$PY - "$W" "$REPEATS" <<'EOF'
import json, statistics, sys
w, n = sys.argv[1], int(sys.argv[2])
rs = [json.load(open(f"{w}/r50_{i}/report.json")) for i in range(1, n + 1)]
fr = [r["data"]["wait_fraction"]["max"] for r in rs]
step = [r["train_time_s"] / r["steps"] for r in rs]
wait = [r["data"]["wait_per_step_s"]["max"] for r in rs]
print(f"data wait / training time (max over ranks): median {statistics.median(fr):.4f} "
      f"(min {min(fr):.4f}, max {max(fr):.4f}); step {statistics.median(step):.2f} s, "
      f"wait per step {statistics.median(wait)*1e3:.1f} ms")
EOF
echo "load: $(uptime)"
