#!/usr/bin/env bash
# JPEG decode throughput per thread: scaletrain's decode path (scaletrain-jpeg-bench: TurboJPEG
# full-size decode to RGB, no resize) against libjpeg-turbo's own tjbench (Debian
# libjpeg-turbo-progs; decompression Mpixels/s) on the same ImageNet-like images (~500x375,
# quality 90, a smooth pattern with noise and edges), one thread each, runs interleaved so that
# load on the machine hits both alike; prints per-image medians and the ratio (target >= 0.8).
#
#   tools/bench_jpeg.sh [BUILD_DIR] [RUNS] [SECONDS_PER_RUN]     (defaults: build 5 1)
set -euo pipefail
BUILD=${1:-build}
RUNS=${2:-5}
SECONDS_PER_RUN=${3:-1}
BENCH=$BUILD/bin/scaletrain-jpeg-bench
PY=/usr/bin/python3
command -v tjbench >/dev/null || { echo "bench_jpeg: tjbench not found (apt-get install libjpeg-turbo-progs)" >&2; exit 1; }
[ -x "$BENCH" ] || { echo "bench_jpeg: $BENCH not built (cmake --build $BUILD --target scaletrain-jpeg-bench)" >&2; exit 1; }

W=$(mktemp -d /tmp/bench_jpeg.XXXXXX)
trap 'rm -rf "$W"' EXIT
$PY "$(dirname "$0")/imagenet_like_jpegs.py" --flat "$W" 4

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
printf "%-10s %-9s %14s %14s %7s\n" image size "tjbench Mpx/s" "ours Mpx/s" ratio
ratios=()
for f in "$W"/img*.jpg; do
  tj=() ours=()
  for ((r = 0; r < RUNS; r++)); do
    # tjbench -quiet: the data row's last column is the decompression Mpixels/s.
    tj+=("$(tjbench "$f" -benchtime "$SECONDS_PER_RUN" -warmup 0.2 -nowrite -quiet | awk 'NF >= 8 && $1 ~ /RGB|BGR/ {print $NF}')")
    ours+=("$("$BENCH" "$f" --runs 1 --seconds "$SECONDS_PER_RUN" | awk '{print $(NF - 1)}')")
  done
  size=$("$BENCH" "$f" --runs 1 --seconds 0.05 | awk '{print $2}')
  t=$(printf "%s\n" "${tj[@]}" | median)
  o=$(printf "%s\n" "${ours[@]}" | median)
  ratio=$(awk -v o="$o" -v t="$t" 'BEGIN {printf "%.3f", o / t}')
  ratios+=("$ratio")
  printf "%-10s %-9s %14.1f %14.1f %7s\n" "$(basename "$f")" "$size" "$t" "$o" "$ratio"
done
echo "median ratio (ours / tjbench, 1 thread, full-size decode): $(printf "%s\n" "${ratios[@]}" | median) (target >= 0.8)"
