#!/usr/bin/env bash
# The whole JPEG input pipeline per core (issue 26, section 4): ImageNet-like JPEGs (about
# 500x375, quality 90, ImageNet's mean size; a smooth pattern with noise and edges, as
# tools/bench_jpeg.sh makes them) converted with `scaletrain-data convert imagenet --encoding
# jpeg`, then read by `scaletrain-data bench --augment` (the training loader: shard reads, TurboJPEG
# decode, random resized crop to 224x224 and flip, batches of uint8) on one rank with 1 and with 2
# decode workers, rounds interleaved; prints images/s and images/s per worker (median over the
# rounds, the later epochs: the files in the page cache, as a node's local copy or a warm cache).
#
#   tools/bench_jpeg_pipeline.sh [BUILD_DIR] [ROUNDS] [IMAGES]      (defaults: build 3 2000)
#
# Results: docs/performance.md, "The JPEG input pipeline per core".
# One worker is one core's worth of decoding only where the rank's own thread is idle, as it is
# in `scaletrain-data bench` (it only waits for batches); `taskset` pins the run to as many
# cores as workers so that the per-worker figure is a per-core one.
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-3}
IMAGES=${3:-2000}
BIN=$BUILD/bin
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d /tmp/bench_jpeg_pipeline.XXXXXX)
trap 'rm -rf "$W"' EXIT

# 10 classes of IMAGES / 10 training images each, 50 validation images (the converter wants both).
$PY "$(dirname "$0")/imagenet_like_jpegs.py" "$W/src" "$IMAGES"
"$BIN/scaletrain-data" convert imagenet --source "$W/src" --output "$W/data" --encoding jpeg --shards 4 >/dev/null
bytes=$(du -sb "$W/data/train" | cut -f1)
echo "dataset: $IMAGES JPEGs, $((bytes / IMAGES)) bytes each on average, 4 shards"

results=$W/results.txt
: >"$results"
for ((r = 1; r <= ROUNDS; r++)); do
  for workers in 1 2; do
    cores=$(seq -s, 0 $((workers - 1)))
    taskset -c "$cores" mpirun -np 1 --bind-to none "$BIN/scaletrain-data" bench "$W/data" --augment --data-threads "$workers" \
      --batch-size 64 --epochs 2 --no-raw --json "$W/r$r-w$workers.json" >/dev/null
    $PY - "$W/r$r-w$workers.json" "$workers" >>"$results" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
print(sys.argv[2], j["samples_per_s"])
EOF
  done
done
$PY - "$results" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for workers in ("1", "2"):
    rates = [float(r) for w, r in rows if w == workers]
    m = statistics.median(rates)
    print(f"{workers} worker(s) on {workers} core(s): {m:.0f} images/s ({m / int(workers):.0f} per core; "
          f"rounds {', '.join(f'{x:.0f}' for x in rates)})")
EOF
