#!/usr/bin/env bash
# The scaling model against runs measured here (issue 14, "Validation"): calibrate ResNet-20 on one
# rank of one thread, fit the fabric to comm-bench runs (2 ranks in one node; 2 emulated nodes of
# one rank), predict, then train the same configurations and compare the step time and its parts
# (report.json step_split; medians of ROUNDS runs of STEPS steps) with the prediction.
#
#   tools/bench_advisor.sh [ROUNDS] [STEPS] [OUTDIR]
#
# Writes OUTDIR/calibration.json, intra.json, inter.json, advice-*.json and prints a markdown table.
# One thread per rank and at most 2 ranks: the model predicts ranks that do not share cores.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
steps=${2:-40}
out=${3:-$(mktemp -d)}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
bin=build/bin
data=$out/data
if [ ! -d "$data" ]; then
  $bin/scaletrain-data synthetic --samples 8192 --val-samples 64 --image-size 32,32,3 --classes 10 --shards 4 \
    --output "$data" >/dev/null
fi

echo "# calibrate" >&2
$bin/scaletrain-advisor calibrate --model resnet20 --batches 16,32,64 --threads 1 --data "$data" \
  --output "$out/calibration.json" >&2
echo "# comm-bench" >&2
mpirun -np 2 --oversubscribe $bin/scaletrain-comm-bench --ranks-per-node 2 --algorithms flat --min-bytes 4K \
  --max-bytes 4M --step-factor 4 --json "$out/intra.json" >/dev/null
mpirun -np 2 --oversubscribe $bin/scaletrain-comm-bench --ranks-per-node 1 --algorithms flat --min-bytes 4K \
  --max-bytes 4M --step-factor 4 --json "$out/inter.json" >/dev/null

# name ranks ranks_per_node batch_per_rank
configs=(
  "1rank-b32 1 1 32"
  "1rank-b64 1 1 64"
  "1node-2ranks-b32 2 2 32"
  "2nodes-1rank-b32 2 1 32"
  "2nodes-1rank-b16 2 1 16"
)
for r in $(seq "$rounds"); do
  for c in "${configs[@]}"; do
    read -r name np per_node batch <<<"$c"
    echo "# round $r: $name" >&2
    mpirun -np "$np" --oversubscribe $bin/scaletrain train --model resnet20 --data "$data" \
      --output-dir "$out/runs/$name-$r" --batch-size "$batch" --max-steps "$steps" --threads 1 \
      --ranks-per-node "$per_node" --log-every 0 --eval-every 1000 >/dev/null
  done
done
for per_node in 1 2; do
  $bin/scaletrain-advisor predict --calibration "$out/calibration.json" --comm-bench "$out/intra.json" \
    "$out/inter.json" --gpus-per-node "$per_node" --gpus 1,2 --batch 32 --scaling weak \
    --json "$out/advice-weak-$per_node.json" >/dev/null
done
$bin/scaletrain-advisor predict --calibration "$out/calibration.json" --comm-bench "$out/intra.json" \
  "$out/inter.json" --gpus-per-node 1 --gpus 1,2 --batch 64 --scaling weak --json "$out/advice-b64.json" >/dev/null
$bin/scaletrain-advisor predict --calibration "$out/calibration.json" --comm-bench "$out/intra.json" \
  "$out/inter.json" --gpus-per-node 1 --gpus 1,2 --batch 16 --scaling weak --json "$out/advice-b16.json" >/dev/null

/usr/bin/python3 - "$out" "$rounds" "${configs[@]}" <<'PY'
import json, statistics, sys
out, rounds, configs = sys.argv[1], int(sys.argv[2]), [c.split() for c in sys.argv[3:]]
def advice(name):
    return json.load(open(f"{out}/{name}.json"))["series"]["weak"]
predicted = {
    ("1rank-b32"): advice("advice-weak-1")[0],
    ("1rank-b64"): advice("advice-b64")[0],
    ("1node-2ranks-b32"): advice("advice-weak-2")[1],
    ("2nodes-1rank-b32"): advice("advice-weak-1")[1],
    ("2nodes-1rank-b16"): advice("advice-b16")[1],
}
print("| run | ranks (per node) | batch/rank | measured step (ms) | predicted (ms) | error | compute meas/pred (ms) | exposed comm meas/pred (ms) | data wait meas/pred (ms) |")
print("|---|---|---|---|---|---|---|---|---|")
for name, np_, per_node, batch in configs:
    reps = [json.load(open(f"{out}/runs/{name}-{r}/report.json"))["step_split"] for r in range(1, rounds + 1)]
    med = lambda k: statistics.median(s[k] for s in reps)
    p = predicted[name]
    err = (p["step_s"] - med("step_s")) / med("step_s") * 100
    print(f"| {name} | {np_} ({per_node}) | {batch} | {med('step_s')*1e3:.1f} | {p['step_s']*1e3:.1f} | {err:+.1f}% "
          f"| {med('compute_s')*1e3:.1f} / {p['compute_s']*1e3:.1f} | {med('exposed_comm_s')*1e3:.2f} / {p['exposed_comm_s']*1e3:.2f} "
          f"| {med('data_wait_s')*1e3:.2f} / {p['data_wait_s']*1e3:.2f} |")
PY
