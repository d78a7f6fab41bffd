#!/usr/bin/env bash
# The scaling model against runs measured here (issue 14, "Validation"): calibrate ResNet-20 on one
# rank of one thread, fit the fabric to comm-bench runs (2 ranks in one node; 2 emulated nodes of
# one rank), predict, then train the same configurations and compare the step time and its parts
# (report.json step_split; medians of ROUNDS runs of STEPS steps) with the prediction.
#
#   [MAX_RANKS=8] tools/bench_advisor.sh [ROUNDS] [STEPS] [OUTDIR]
#
# Writes OUTDIR/calibration-R.json, intra.json, inter.json, runs/NAME-R/{report,advice}.json and
# prints a markdown table.
# One thread per rank and no more ranks than cores: the model predicts ranks that do not share cores.
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

echo "# comm-bench" >&2
mpirun -np 2 --oversubscribe $bin/scaletrain-comm-bench --ranks-per-node 2 --algorithms flat --min-bytes 4K \
  --max-bytes 4M --step-factor 4 --json "$out/intra.json" >/dev/null
mpirun -np 2 --oversubscribe $bin/scaletrain-comm-bench --ranks-per-node 1 --algorithms flat --min-bytes 4K \
  --max-bytes 4M --step-factor 4 --json "$out/inter.json" >/dev/null

# name ranks ranks_per_node batch_per_rank: 1 rank, then 2, 4, 8 ranks in one node and on as many
# emulated nodes, as far as this machine has a core per rank (MAX_RANKS overrides).
max_ranks=${MAX_RANKS:-$(nproc)}
configs=("1rank-b32 1 1 32" "1rank-b64 1 1 64")
for p in 2 4 8; do
  [ "$p" -le "$max_ranks" ] || break
  configs+=("1node-${p}ranks-b32 $p $p 32" "${p}nodes-1rank-b32 $p 1 32" "${p}nodes-1rank-b16 $p 1 16")
done
# Each round calibrates, then runs every configuration and predicts it from that round's calibration:
# this machine's speed drifts between minutes, so prediction and measurement are taken side by side.
for r in $(seq "$rounds"); do
  echo "# round $r: calibrate" >&2
  $bin/scaletrain-advisor calibrate --model resnet20 --batches 16,32,64 --threads 1 --steps 10 --data "$data" \
    --output "$out/calibration-$r.json" >/dev/null
  for c in "${configs[@]}"; do
    read -r name np per_node batch <<<"$c"
    echo "# round $r: $name" >&2
    mpirun -np "$np" --oversubscribe $bin/scaletrain train --model resnet20 --data "$data" \
      --output-dir "$out/runs/$name-$r" --batch-size "$batch" --max-steps "$steps" --threads 1 \
      --ranks-per-node "$per_node" --log-every 0 --eval-every 1000 >/dev/null
    $bin/scaletrain-advisor predict --calibration "$out/calibration-$r.json" --comm-bench "$out/intra.json" \
      "$out/inter.json" --gpus-per-node "$per_node" --gpus "$np" --batch "$batch" --scaling weak \
      --json "$out/runs/$name-$r/advice.json" >/dev/null
  done
done

/usr/bin/python3 - "$out" "$rounds" "${configs[@]}" <<'PY'
import json, statistics, sys
out, rounds, configs = sys.argv[1], int(sys.argv[2]), [c.split() for c in sys.argv[3:]]
print("| run | ranks (per node) | batch/rank | measured step (ms) | predicted (ms) | error (median of rounds) | errors of the rounds | compute meas/pred (ms) | exposed comm meas/pred (ms) | data wait meas/pred (ms) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for name, np_, per_node, batch in configs:
    runs = [f"{out}/runs/{name}-{r}" for r in range(1, rounds + 1)]
    meas = [json.load(open(f"{d}/report.json"))["step_split"] for d in runs]
    pred = [json.load(open(f"{d}/advice.json"))["series"]["weak"][0] for d in runs]
    errs = [(p["step_s"] - m["step_s"]) / m["step_s"] * 100 for p, m in zip(pred, meas)]
    med = lambda xs, k: statistics.median(x[k] for x in xs) * 1e3
    print(f"| {name} | {np_} ({per_node}) | {batch} | {med(meas, 'step_s'):.1f} | {med(pred, 'step_s'):.1f} "
          f"| {statistics.median(errs):+.1f}% | {', '.join(f'{e:+.0f}%' for e in errs)} "
          f"| {med(meas, 'compute_s'):.1f} / {med(pred, 'compute_s'):.1f} "
          f"| {med(meas, 'exposed_comm_s'):.2f} / {med(pred, 'exposed_comm_s'):.2f} "
          f"| {med(meas, 'data_wait_s'):.2f} / {med(pred, 'data_wait_s'):.2f} |")
PY
