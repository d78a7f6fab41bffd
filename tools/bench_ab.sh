#!/usr/bin/env bash
# bench_ab.sh A_BIN B_BIN [ROUNDS]: training throughput of two builds side by side, rounds
# interleaved (A, B, A, B, ...) so that the machine's drift falls on both alike: ResNet-20 with the
# demo's recipe (inputs/resnet20_fashion_mnist.ini: 2 ranks x 1 thread, batch 64 per rank, on
# synthetic 28x28x1 images, 150 steps) and NCF (2 ranks x 1 thread, batch 1024 per rank, Adam,
# 150 steps on a synthetic ml-1m-sized dataset). Rates are steady-state samples/s (global batch /
# report.json's step_split.step_s, the first step left out); prints each round, then per workload
# the median of A, of B and B / A. For "nothing else changes" checks of a refactor: build the
# previous commit with the same flags into A_BIN's folder.
#   tools/bench_ab.sh /tmp/before/build/bin build/bin 5
set -euo pipefail
A=${1:?usage: bench_ab.sh A_BIN B_BIN [ROUNDS]}
B=${2:?usage: bench_ab.sh A_BIN B_BIN [ROUNDS]}
rounds=${3:-5}
OUT=${OUT:-$(mktemp -d)}
PY=${PY:-/usr/bin/python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$A/scaletrain-data" synthetic --task image_classification --samples 20000 --val-samples 64 --image-size 28,28,1 \
  --classes 10 --shards 4 --output "$OUT/img" --overwrite >/dev/null
"$A/scaletrain-data" synthetic --task recommendation --users 6040 --items 3706 --groups 20 --positives-per-user 50 \
  --eval-negatives 1 --output "$OUT/rec" --overwrite >/dev/null
: >"$OUT/rates.txt"
rate() {  # report.json -> steady-state samples/s
  "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); print(r["global_batch_size"] / r["step_split"]["step_s"])' "$1"
}
for round in $(seq 1 "$rounds"); do
  for side in A B; do
    bin=$A
    [ $side = B ] && bin=$B
    mpirun -np 2 --oversubscribe --bind-to none "$bin/scaletrain" train --config inputs/resnet20_fashion_mnist.ini \
      --data "$OUT/img" --threads 1 --epochs 1 --max-steps 150 --eval-every 0 --target-accuracy 0 --log-every 0 \
      --output-dir "$OUT/r20-$side" --overwrite >"$OUT/r20-$side.log" 2>&1
    mpirun -np 2 --oversubscribe --bind-to none "$bin/scaletrain" train --model ncf --data "$OUT/rec" --threads 1 \
      --batch-size 1024 --epochs 1 --max-steps 150 --eval-every 0 --log-every 0 --output-dir "$OUT/ncf-$side" \
      --overwrite >"$OUT/ncf-$side.log" 2>&1
    echo "round $round $side resnet20 $(rate "$OUT/r20-$side/report.json") ncf $(rate "$OUT/ncf-$side/report.json")" |
      tee -a "$OUT/rates.txt"
  done
done
"$PY" - "$OUT/rates.txt" <<'PY'
import statistics, sys
rates = {}
for line in open(sys.argv[1]):
    _, _, side, _, r20, _, ncf = line.split()
    rates.setdefault(("resnet20", side), []).append(float(r20))
    rates.setdefault(("ncf", side), []).append(float(ncf))
for w in ("resnet20", "ncf"):
    a, b = statistics.median(rates[(w, "A")]), statistics.median(rates[(w, "B")])
    print(f"{w}: A {a:.1f} samples/s, B {b:.1f} samples/s (medians of {len(rates[(w, 'A')])}); B / A = {b / a:.3f}")
PY
