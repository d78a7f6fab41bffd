#!/usr/bin/env bash
# Input-pipeline benchmark for docs/performance.md (issue 4, section 9):
#  (a) scaletrain-data bench on a raw dataset over 1 GB in the page cache: pipeline MB/s against
#      the raw sequential read bandwidth of the same files, measured in the same run, for the
#      posix and mmap readers, 1 and 2 ranks, 1 and 2 data threads and batch sizes 32-256
#      (CONFIGS, io:ranks:threads:batch), REPEATS interleaved rounds; prints a markdown table of
#      medians (min-max) over the rounds: all epochs, first epoch, later epochs (EPOCHS, 3).
#  (b) resnet50 training on CPU (2 ranks): data wait as a fraction of training time, from
#      report.json (data.wait_fraction.max), REPEATS runs.
# Usage: tools/bench_data.sh [WORKDIR]   (default /tmp/scaletrain-bench-data)
# Env: REPEATS (3), SAMPLES (7000: 7000 x 224x224x3 = 1.05 GB), EPOCHS (3), CONFIGS, STEPS (16), SKIP_TRAIN=1.
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

echo "== (a) pipeline vs raw read: $REPEATS rounds, every configuration once per round (interleaved)"
# Training's settings: augmentation on (random flip), the default prefetch, $EPOCHS epochs so that
# the first epoch (one-time costs) and the later ones are reported apart.
EPOCHS=${EPOCHS:-3}
CONFIGS=${CONFIGS:-"posix:1:1:64 posix:1:2:64 posix:2:1:64 posix:2:2:64 mmap:1:1:64 mmap:1:2:64 mmap:2:1:64 mmap:2:2:64 mmap:1:1:32 mmap:2:1:32 mmap:1:1:128 mmap:2:1:128 mmap:1:1:256 mmap:2:1:256"}
for i in $(seq "$REPEATS"); do
  for c in $CONFIGS; do
    IFS=: read -r io np t b <<<"$c"
    mpirun --oversubscribe -np "$np" "$BIN/scaletrain-data" bench "$D" --io "$io" --batch-size "$b" --data-threads "$t" \
      --augment --epochs "$EPOCHS" --json "$W/bench_${io}_np${np}_t${t}_b${b}_$i.json" >/dev/null
  done
done
$PY - "$W" "$REPEATS" $CONFIGS <<'EOF'
import json, statistics, sys
w, n, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def stat(xs):
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"
print("| io | ranks | data threads | batch | raw read MB/s | pipeline MB/s, all epochs | pipeline / raw, all epochs | "
      "first epoch / raw | later epochs / raw | read stage alone / raw |")
print("|---|---|---|---|---|---|---|---|---|---|")
for c in configs:
    io, np_, t, b = c.split(":")
    rs = [json.load(open(f"{w}/bench_{io}_np{np_}_t{t}_b{b}_{i}.json")) for i in range(1, n + 1)]
    raw = [r["raw_read_mb_per_s"] for r in rs]
    print(f"| {io} | {np_} | {t} | {b} | {statistics.median(raw):.0f} | {statistics.median(r['mb_per_s'] for r in rs):.0f} | "
          f"{stat([r['pipeline_over_raw'] for r in rs])} | "
          f"{stat([r['first_epoch_mb_per_s'] / r['raw_read_mb_per_s'] for r in rs])} | "
          f"{stat([r['later_epochs_over_raw'] for r in rs])} | "
          f"{stat([r['reader_mb_per_s'] / r['raw_read_mb_per_s'] for r in rs])} |")
EOF
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
