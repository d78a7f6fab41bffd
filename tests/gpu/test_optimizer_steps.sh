#!/usr/bin/env bash
# The optimizer updates and gradient accumulation on the GPU: one step of ResNet-20 with
# --optimizer adam, with --optimizer lars, and with SGD over 2 micro-batches (--accumulate-steps
# 2), each on the GPU and on the CPU from the same weights and batch, the update w1 - w0 compared
# as in test_resnet50_step.sh. Skips (77) without a GPU.
source "$(dirname "$0")/lib.sh"
require_gpu
T=$TMP_ROOT/gpu_optimizer_steps
rm -rf "$T" && mkdir -p "$T"
batch=${ST_GPU_TEST_BATCH:-32}
image=${ST_GPU_TEST_IMAGE:-32,32,3}

synthetic_data "$T/data" $((4 * batch)) 16 "$image" 10
common=(--model resnet20 --data "$T/data" --epochs 1 --max-steps 1 --batch-size "$batch" --seed 13
  --lr-schedule constant --warmup-epochs 0 --log-every 1 --eval-every 0)
# Tolerance: the update's relative L2 error within 3e-2, as ResNet-50's one SGD step
# (test_resnet50_step.sh: the first step's gradients differ by up to a few 1e-3 between cuDNN's
# and oneDNN's sums, PyTorch's own GPU and CPU by 1.5e-2); Adam's first update is lr times the
# gradient's sign almost everywhere, so only the gradients near zero can differ. First set here,
# not yet measured on a GPU (docs/gpu.md). A rate 10% off is an error of 1e-1 (the harness checks it).
status=0
for case in "adam:--optimizer adam --base-lr 0.001" "lars:--optimizer lars --base-lr 1.0" \
  "accumulate:--optimizer sgd --base-lr 0.1 --accumulate-steps 2"; do
  name=${case%%:*}
  read -r -a opts <<<"${case#*:}"
  run_train "$name-gpu" 1 "$DEV" "$TEST_ARGS" "${common[@]}" "${opts[@]}"
  run_train "$name-cpu" 1 cpu "" "${common[@]}" "${opts[@]}"
  # w0: the first step of a run whose rate is so small that it leaves the weights as they were
  # (Adam's step is lr-sized; 1e-30 rounds away in float32 as SGD's and LARS's).
  w0_opts=("${opts[@]}")
  for i in "${!w0_opts[@]}"; do [ "${w0_opts[$i]}" = --base-lr ] && w0_opts[$((i + 1))]=1e-30; done
  run_train "$name-w0" 1 cpu "" "${common[@]}" "${w0_opts[@]}"
  if [ "$DEV" = cuda ]; then
    grep -q "device: cuda" "$T/$name-gpu.log" || fail "$name: the GPU run did not say it ran on cuda"
  fi
  echo "== $name"
  compare_checkpoints --what params --base "$T/$name-w0" --tolerance 3e-2 "$T/$name-gpu" "$T/$name-cpu" || status=1
  compare_losses "$T/$name-gpu.log" "$T/$name-cpu.log" 1e-3 1e-3 || status=1
done
[ $status = 0 ] || fail "an optimizer step on --device $DEV ${TEST_ARGS:+($TEST_ARGS) }differs from the CPU's (above)"
echo "PASS"
