#!/usr/bin/env bash
# bench_gpu_allreduce.sh: the GPU all-reduce's figures (issue 27, section 8) on the GPUs at hand:
#   1. scaletrain-comm-bench --device cuda tables for 1 to 4 ranks, emulated nodes of one rank
#      (--ranks-per-node 1): nccl (one rank only: a world of several cannot form on one GPU),
#      hierarchical (NCCL in the node, MPI across), staged (--intra mpi) and the MPI baseline;
#   2. ResNet-50 with 2 and 4 emulated nodes of one rank: report.json's all-reduce time and its
#      exposed part per step for each algorithm one GPU can run (hierarchical --intra nccl, and
#      hierarchical and flat through host memory, --intra mpi). With the ranks sharing one GPU this
#      is cost accounting, not speed: their kernels take turns.
# Run in the repository root; in the GPU bundle (gpu-check.sh's benches.sh) $BUNDLE/bin holds the
# programs. BENCH_RANKS (default 1 2 3 4) and BENCH_NODES (default 2 4) choose the counts,
# BENCH_STEPS (default 6) the ResNet-50 steps, BENCH_BATCH (default 32) its batch per rank;
# BENCH_DEVICE=cpu BENCH_IMAGE=32,32,3 make a dry run on a machine without a GPU.
set -euo pipefail
BIN=${ST_BIN:-${BUNDLE:+$BUNDLE/bin}}
BIN=${BIN:-build/bin}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
device=${BENCH_DEVICE:-cuda}
image=${BENCH_IMAGE:-224,224,3}
steps=${BENCH_STEPS:-6}
batch=${BENCH_BATCH:-32}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() { mpirun -np "$1" --oversubscribe --bind-to none "${@:2}"; }

echo "== comm-bench --device $device, emulated nodes of one rank"
for np in ${BENCH_RANKS:-1 2 3 4}; do
  algorithms=hierarchical,staged
  [ "$device" = cpu ] && algorithms=flat,hierarchical
  [ "$device" = cuda ] && [ "$np" = 1 ] && algorithms=nccl,hierarchical,staged
  echo "-- $np rank(s)"
  run "$np" "$BIN/scaletrain-comm-bench" --device "$device" --ranks-per-node 1 --algorithms "$algorithms" \
    --min-bytes 64K --max-bytes 64M --step-factor 4 --iters 5 --warmup 2
done

echo "== ResNet-50, $batch images per rank, $steps steps: all-reduce per step (ms), exposed (ms)"
"$BIN/scaletrain-data" synthetic --task image_classification --samples 512 --val-samples 16 --image-size "$image" \
  --classes 1000 --shards 4 --output "$out/data" >/dev/null
variants=("hierarchical --intra nccl" "hierarchical --intra mpi" "flat --intra mpi")
[ "$device" = cpu ] && variants=("hierarchical --intra mpi" "flat --intra mpi")
printf '| nodes of one rank | algorithm | all-reduce ms/step | exposed ms/step | measured by |\n| --- | --- | --- | --- | --- |\n'
for nodes in ${BENCH_NODES:-2 4}; do
  for variant in "${variants[@]}"; do
    read -r shape intra_flag intra <<<"$variant"
    name="$nodes-$shape-$intra"
    # Epochs enough for the steps; --no-augment: the GPU's work, not the host's crops.
    per_epoch=$((512 / (nodes * batch)))
    [ "$per_epoch" -ge 1 ] || per_epoch=1
    if ! run "$nodes" "$BIN/scaletrain" train --model resnet50 --data "$out/data" --device "$device" \
      --batch-size "$batch" --epochs $(((steps + per_epoch - 1) / per_epoch)) --max-steps "$steps" --no-augment \
      --ranks-per-node 1 --allreduce "$shape" "$intra_flag" "$intra" --cuda-aware-mpi off --eval-every 0 \
      --log-every 0 --output-dir "$out/$name" >"$out/$name.log" 2>&1; then
      printf '| %s | %s %s %s | failed: %s | | |\n' "$nodes" "$shape" "$intra_flag" "$intra" "$(tail -1 "$out/$name.log")"
      continue
    fi
    /usr/bin/env python3 - "$out/$name/report.json" "$nodes" "$variant" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["allreduce_time"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {t['per_step_s']['max'] * 1e3:.2f} | {t['exposed_per_step_s']['max'] * 1e3:.2f} "
      f"| {t['measured_by']} |")
PY
  done
done
