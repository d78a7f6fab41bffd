#!/usr/bin/env bash
# The wait at an epoch's first step, with and without reading ahead across epochs (issue 26,
# section 4; data/loader.hpp): short epochs of JPEG batches, as in a strong-scaling series at many
# nodes, where an epoch is a few steps and its start would recur every few steps.
#
# ImageNet-like JPEGs (as tools/bench_jpeg_pipeline.sh makes them) converted with `scaletrain-data
# convert imagenet --encoding jpeg`; `scaletrain train --model resnet20 --image-size 64,64` on one
# rank, one compute thread and one decode worker, batches of 32, 8 steps per epoch, with --trace.
# Each round runs the loader as it is and with SCALETRAIN_LOADER_READ_AHEAD=0 (the hook that turns
# reading ahead off), one after the other. From each run's trace: the `data_wait` of every later
# epoch's first step (epochs 2 and on; the first epoch's first step waits in both: nothing was
# read before the loader started) against the other steps'.
#
#   tools/bench_epoch_start.sh [BUILD_DIR] [ROUNDS] [EPOCHS]      (defaults: build 3 6)
#
# Results: docs/performance.md, "An epoch's first batch, read ahead".
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-3}
EPOCHS=${3:-6}
BIN=$BUILD/bin
PY=/usr/bin/python3
BATCH=32
IMAGES=256  # 8 steps of 32 per epoch
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d /tmp/bench_epoch_start.XXXXXX)
trap 'rm -rf "$W"' EXIT

$PY "$(dirname "$0")/imagenet_like_jpegs.py" "$W/src" "$IMAGES"
"$BIN/scaletrain-data" convert imagenet --source "$W/src" --output "$W/data" --encoding jpeg --shards 2 >/dev/null
echo "dataset: $IMAGES JPEGs, batches of $BATCH: $((IMAGES / BATCH)) steps per epoch, $EPOCHS epochs"

results=$W/results.txt
: >"$results"
for ((r = 1; r <= ROUNDS; r++)); do
  for ahead in 1 0; do
    out=$W/r$r-a$ahead
    SCALETRAIN_LOADER_READ_AHEAD=$ahead mpirun -np 1 --bind-to none "$BIN/scaletrain" train --model resnet20 \
      --data "$W/data" --image-size 64,64 --batch-size $BATCH --epochs "$EPOCHS" --eval-every 1000 --threads 1 \
      --data-threads 1 --log-every 0 --trace --output-dir "$out" >"$out.log" 2>&1 || {
      cat "$out.log"
      exit 1
    }
    $PY - "$out/trace/rank-00000.json" "$ahead" $((IMAGES / BATCH)) >>"$results" <<'EOF'
import json, statistics, sys
trace = json.load(open(sys.argv[1]))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
waits = sorted((e["ts"], e["dur"] / 1000.0) for e in events if e.get("name") == "data_wait" and e.get("tid") == 0)
steps = int(sys.argv[3])
starts = [w for i, (_, w) in enumerate(waits) if i % steps == 0 and i > 0]  # later epochs' first steps
others = [w for i, (_, w) in enumerate(waits) if i % steps != 0]
print(sys.argv[2], statistics.median(starts), statistics.median(others), waits[0][1])
EOF
  done
done
$PY - "$results" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for ahead, label in (("1", "read ahead (the loader)"), ("0", "not read ahead (SCALETRAIN_LOADER_READ_AHEAD=0)")):
    mine = [[float(x) for x in r[1:]] for r in rows if r[0] == ahead]
    starts = [m[0] for m in mine]
    print(f"{label}: data_wait at a later epoch's first step {statistics.median(starts):.3f} ms median "
          f"(rounds {', '.join(f'{x:.3f}' for x in starts)}); other steps "
          f"{statistics.median(m[1] for m in mine):.3f} ms; the run's first step "
          f"{statistics.median(m[2] for m in mine):.1f} ms")
EOF
