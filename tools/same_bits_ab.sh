#!/usr/bin/env bash
# same_bits_ab.sh A_BIN B_BIN: the checkpoints of three short runs are bitwise equal between two
# builds (a refactor's "nothing else changes"): ResNet-20 with SGD (2 ranks, 20 steps), NCF with
# Adam (2 ranks, 30 steps) and ResNet-20 with LARS and --accumulate-steps 2 (2 ranks, 6 steps), on
# synthetic data, one thread per rank. Compared by tests/cli/checkpoints.py (h5py, every dataset);
# their MLPerf logs and reports by tools/same_records_ab.py (the same keys and values, times aside).
# Build the previous commit with the same flags into A_BIN's folder.
#   tools/same_bits_ab.sh /tmp/before/build/bin build/bin
set -euo pipefail
A=${1:?usage: same_bits_ab.sh A_BIN B_BIN}
B=${2:?usage: same_bits_ab.sh A_BIN B_BIN}
OUT=${OUT:-$(mktemp -d)}
PY=${PY:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")/.." && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$A/scaletrain-data" synthetic --task image_classification --samples 640 --val-samples 64 --image-size 28,28,1 \
  --classes 10 --output "$OUT/img" --overwrite >/dev/null
"$A/scaletrain-data" synthetic --task recommendation --users 600 --items 400 --groups 10 --positives-per-user 12 \
  --eval-negatives 20 --output "$OUT/rec" --overwrite >/dev/null
runs=(
  "r20-sgd|--model resnet20 --data $OUT/img --batch-size 16 --epochs 1 --max-steps 20"
  "ncf-adam|--model ncf --data $OUT/rec --batch-size 256 --epochs 1 --max-steps 30"
  "r20-lars-acc2|--model resnet20 --data $OUT/img --batch-size 16 --optimizer lars --accumulate-steps 2 --epochs 1 --max-steps 6"
)
status=0
for run in "${runs[@]}"; do
  name=${run%%|*}
  read -r -a opts <<<"${run#*|}"
  for side in A B; do
    bin=$A
    [ $side = B ] && bin=$B
    mpirun -np 2 --oversubscribe --bind-to none "$bin/scaletrain" train "${opts[@]}" --threads 1 --log-every 0 \
      --output-dir "$OUT/$name-$side" --overwrite >"$OUT/$name-$side.log" 2>&1
  done
  if "$PY" "$HERE/tests/cli/checkpoints.py" same "$OUT/$name-A" "$OUT/$name-B"; then
    echo "$name: bitwise the same checkpoints"
  else
    echo "$name: the checkpoints differ"
    status=1
  fi
  if "$PY" "$HERE/tools/same_records_ab.py" "$OUT/$name-A" "$OUT/$name-B"; then
    echo "$name: the same mllog.txt and report.json (times aside)"
  else
    echo "$name: mllog.txt or report.json differ"
    status=1
  fi
done
exit $status
