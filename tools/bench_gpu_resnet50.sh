#!/usr/bin/env bash
# bench_gpu_resnet50.sh: ResNet-50 fp32 training throughput of scaletrain on one GPU at batch 64 and
# 128, beside PyTorch's on the same GPU with the same batch and SGD settings, TF32 off and on
# (tools/bench_torch_resnet50_gpu.py; issue 10, section 7). Synthetic 224x224x3 images, 1000
# classes, --no-augment (normalisation only): the GPU's work is measured, not the host's crop and
# flip. scaletrain runs each batch size in plain fp32 (its default: docs/architecture.md, "fp32
# means fp32 on a GPU") and with --tf32, to be read against PyTorch's TF32-off and TF32-on figures.
#
# Run in the repository root; in the GPU bundle (gpu-check.sh's benches.sh) $BUNDLE/bin holds the
# programs. The figures go to stdout (gpu-check.sh's logs); data and runs to a temporary folder,
# not to $OUT_DIR, whose files the device tool carries back. BENCH_STEPS (default 40) steps per
# batch size; the rate is the median of the progress lines (--log-every BENCH_LOG_EVERY, default 10)
# after the first (cuDNN's algorithm search, the allocator's first allocations); BENCH_WARMUP
# (default 10) untimed steps for PyTorch. The GPU check (benches.sh) runs 20 steps, logged every 5. BENCH_DEVICE=cpu BENCH_IMAGE=32,32,3 make
# a dry run of the script on a machine without a GPU (the PyTorch part then stops: no GPU).
set -euo pipefail
BIN=${ST_BIN:-${BUNDLE:+$BUNDLE/bin}}
BIN=${BIN:-build/bin}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
steps=${BENCH_STEPS:-40}
log_every=${BENCH_LOG_EVERY:-10}
warmup=${BENCH_WARMUP:-10}
batches=${BENCH_BATCH_SIZES:-64 128}
device=${BENCH_DEVICE:-cuda}
image=${BENCH_IMAGE:-224,224,3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# 1280 training images (190 MB), read again each epoch: ten batches of 128 an epoch.
"$BIN/scaletrain-data" synthetic --task image_classification --samples 1280 --val-samples 64 --image-size "$image" \
  --classes 1000 --shards 4 --output "$out/data" >/dev/null
for b in $batches; do
 for tf32 in off on; do
  per_epoch=$((1280 / b))
  epochs=$(((steps + per_epoch - 1) / per_epoch))
  tf32_flag=()
  [ "$tf32" = on ] && tf32_flag=(--tf32)
  mpirun -np 1 --bind-to none "$BIN/scaletrain" train --device "$device" --model resnet50 --data "$out/data" \
    --output-dir "$out/run-$b" --overwrite "${tf32_flag[@]}" --batch-size "$b" --epochs "$epochs" --max-steps "$steps" \
    --base-lr 0.1 --lr-schedule constant --warmup-epochs 0 --momentum 0.9 --weight-decay 5e-5 \
    --label-smoothing 0.1 --no-augment --data-threads 8 --eval-every 0 --log-every "$log_every" >"$out/run-$b.log" 2>&1 ||
    { tail -30 "$out/run-$b.log"; echo "scaletrain resnet50 batch $b: FAILED"; exit 1; }
  grep -q "device: $device" "$out/run-$b.log" || { echo "scaletrain resnet50 batch $b: did not run on $device"; exit 1; }
  python3 - "$out/run-$b.log" "$b" "$device" "$tf32" "$log_every" <<'PY'
import re, statistics, sys
rates = [float(r) for r in re.findall(r"([0-9.]+) samples/s", open(sys.argv[1]).read())]
if len(rates) < 2:
    sys.exit(f"scaletrain resnet50 batch {sys.argv[2]}: too few progress lines ({len(rates)})")
print(f"scaletrain resnet50 batch {sys.argv[2]} on {sys.argv[3]}, fp32, tf32 {sys.argv[4]}: {statistics.median(rates[1:]):.1f} images/s "
      f"(median of {len(rates) - 1} windows of {sys.argv[5]} steps, after the first)")
PY
  python3 "$(dirname "$0")/gpu_run_summary.py" "$out/run-$b/report.json" || true
  rm -rf "$out/run-$b/checkpoints"  # 200 MB each
 done
done
python3 "$(dirname "$0")/bench_torch_resnet50_gpu.py" --batch-sizes "$(echo $batches | tr ' ' ',')" --steps "$steps" --warmup "$warmup"
