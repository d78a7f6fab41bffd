#!/usr/bin/env bash
# ResNet-50 training on 2 ranks: all-reduce time per step (total: the communication thread busy
# with gradient buckets; exposed: the step waiting after backward) with and without overlap,
# read from report.json. Rounds alternate the two modes; medians are printed.
#
#   tools/bench_overlap.sh [ROUNDS] [STEPS] [IMAGE_SIZE] [BATCH_PER_RANK]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
steps=${2:-12}
size=${3:-64}
batch=${4:-8}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build/bin/scaletrain-data synthetic --task image_classification --samples $((2 * batch * (steps + 1))) \
  --val-samples 16 --image-size "$size,$size,3" --classes 100 --shards 2 --output "$tmp/data" >/dev/null
for r in $(seq "$rounds"); do
  for mode in overlap no-overlap; do
    extra=()
    [ "$mode" = no-overlap ] && extra=(--no-overlap)
    mpirun -np 2 build/bin/scaletrain train --model resnet50 --data "$tmp/data" --output-dir "$tmp/$mode-$r" \
      --batch-size "$batch" --max-steps "$steps" --threads 1 --log-every 0 --eval-every 1000 "${extra[@]}" >/dev/null
  done
done
/usr/bin/python3 - "$tmp" "$rounds" <<'PY'
import json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
def row(mode):
    rs = [json.load(open(f"{tmp}/{mode}-{r}/report.json")) for r in range(1, rounds + 1)]
    med = lambda f: statistics.median(f(r) for r in rs)
    step = med(lambda r: r["train_time_s"] / r["steps"])
    total = med(lambda r: r["allreduce_time"]["per_step_s"]["mean"])
    exposed = med(lambda r: r["allreduce_time"]["exposed_per_step_s"]["mean"])
    backward = med(lambda r: r["phases"]["backward"]["mean_s"] / r["steps"])
    mb = rs[0]["allreduce_bytes_per_step"] / 1e6
    buckets = rs[0]["bucket_layout"]["buckets"]
    return f"| {mode} | {step*1e3:.0f} | {backward*1e3:.0f} | {total*1e3:.1f} | {exposed*1e3:.1f} | {mb:.1f} MB, {buckets} buckets |"
print("| mode | step (ms) | backward (ms) | all-reduce total (ms/step) | exposed (ms/step) | gradients |")
print("|---|---|---|---|---|---|")
print(row("overlap"))
print(row("no-overlap"))
PY
