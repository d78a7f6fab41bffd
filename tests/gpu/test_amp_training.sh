#!/usr/bin/env bash
# Mixed precision on the GPU against the CPU's (issue 26, docs/mixed-precision.md): resnet20, 3
# steps from the same weights and batches in amp-fp16 (dynamic loss scaling, an overflow forced at
# step 2) and in amp-bf16, on the GPU and on the CPU, which is the reference. Each pair must agree:
#   overflow:   both sides skip the same steps with the same scales, step 2 among them in
#               amp-fp16 (fp16's own overflows at a scale of 65536 may come first: they must match);
#   losses:     the 3 steps' losses within 1e-2 x |loss| + 1e-2 (16-bit activations: a value a
#               hair apart in fp32 can round a unit of the format apart);
#   parameters: within 1e-2 relative L2, and closer to the CPU's AMP run than to the CPU's fp32
#               run of the same steps: a GPU that left out the rounding (fp32 numerics under an
#               amp flag) would be nearer the fp32 run, and fails here. (Not "nearer by half": the
#               devices' own fp32 drift over these 3 steps, 7.8e-4 on the first H200 run, is as
#               large as AMP's distance from fp32, 7.2e-4; docs/gpu.md);
# and the GPU's start-up lines name the precision, and report.json says most convolution plans run
# in the 16-bit format (cuDNN on tensor cores; a shape without a 16-bit algorithm runs in fp32).
# Then transformer-tiny, ncf and resnet20 with --fuse bn-add-relu in the first precision, GPU
# against CPU, with 16-bit storage. amp-bf16 is skipped on a GPU below compute capability 8.0,
# which train refuses it on. Skips (77) without a GPU; ST_GPU_TEST_DEVICE=cpu
# runs it CPU against CPU (cli.gpu_training_harness), where the pairs are equal.
source "$(dirname "$0")/lib.sh"
require_gpu
T=$TMP_ROOT/gpu_amp_training
rm -rf "$T" && mkdir -p "$T"
batch=${ST_GPU_TEST_BATCH:-32}
image=${ST_GPU_TEST_IMAGE:-32,32,3}

synthetic_data "$T/data" 512 32 "$image" 10
base=(--model resnet20 --data "$T/data" --epochs 1 --max-steps 3 --batch-size "$batch" --seed 11 --log-every 1
  --eval-every 0 --base-lr 0.05 --lr-schedule constant --warmup-epochs 0 --momentum 0.9)
# The roundings compared below are the unfused ops' (--fuse auto would fuse amp-fp16 on a GPU).
common=("${base[@]}" --fuse none)
# The fp32 references: amp-fp16's with the same dynamic scale and forced overflow.
run_train cpu-fp32-amp-bf16 1 cpu "" "${common[@]}" --precision fp32
SCALETRAIN_INJECT_OVERFLOW=2 run_train cpu-fp32-amp-fp16 1 cpu "" "${common[@]}" --precision fp32 --loss-scale dynamic
# The relative L2 distance of two runs' parameters, as compare_checkpoints prints it.
distance() {
  { compare_checkpoints --what params --tolerance 1e30 "$1" "$2" || true; } |
    sed -n 's/.*relative L2 error \([0-9.e+-]*\) (tolerance.*/\1/p'
}
status=0
precisions=(amp-fp16 amp-bf16)
# Below compute capability 8.0 (V100) there are no bf16 tensor cores: train refuses amp-bf16 there.
if [ "$DEV" = cuda ]; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 || true)
  if [ -n "$cap" ] && [ "${cap%%.*}" -lt 8 ] 2>/dev/null; then
    echo "skip amp-bf16: the GPU's compute capability is $cap (no bf16 tensor cores; train refuses amp-bf16 there)"
    precisions=(amp-fp16)
  fi
fi
for precision in "${precisions[@]}"; do
  overflow=""
  [ "$precision" = amp-fp16 ] && overflow=2
  SCALETRAIN_INJECT_OVERFLOW=$overflow run_train "gpu-$precision" 1 "$DEV" "$TEST_ARGS" "${common[@]}" --precision "$precision"
  SCALETRAIN_INJECT_OVERFLOW=$overflow run_train "cpu-$precision" 1 cpu "" "${common[@]}" --precision "$precision"
  # The skipped steps and the scale's moves, alike on both sides; the forced one among them.
  skips_gpu=$(grep "inf or NaN in the gradients" "$T/gpu-$precision.log" || true)
  skips_cpu=$(grep "inf or NaN in the gradients" "$T/cpu-$precision.log" || true)
  [ "$skips_gpu" = "$skips_cpu" ] ||
    { echo "FAIL: $precision: the skipped steps differ: GPU: ${skips_gpu:-none}; CPU: ${skips_cpu:-none}"; status=1; }
  if [ -n "$overflow" ]; then
    grep -q "^step 2: inf or NaN in the gradients after the all-reduce; skipped on every rank" <<<"$skips_gpu" ||
      { echo "FAIL: the GPU run in $precision did not skip step 2: ${skips_gpu:-no step skipped}"; status=1; }
  fi
  echo "$precision: skipped steps on both sides: $(grep -c . <<<"$skips_cpu" || true)"
  grep -q "precision: $precision" "$T/gpu-$precision.log" ||
    { echo "FAIL: the $precision run on --device $DEV does not say its precision: $(grep -m3 precision "$T/gpu-$precision.log")"; status=1; }
  # On a GPU every convolution ran in the 16-bit format (cuDNN on tensor cores), as report.json says.
  if [ "$DEV" = cuda ]; then
    "$PY" - "$T/gpu-$precision/report.json" "$precision" <<'PY' || status=1
import collections, json, sys
want = {"amp-fp16": "f16", "amp-bf16": "bf16"}[sys.argv[2]]
algos = json.load(open(sys.argv[1]))["device"].get("conv_algorithms") or []
count = collections.Counter((a["direction"], a.get("data"), a["algo"], a["math"]) for a in algos)
for (direction, data, algo, math), n in sorted(count.items()):
    print(f"cuDNN {direction} in {data}: algo {algo}, math {math}: {n} shape(s)")
# A shape cuDNN has no 16-bit algorithm for runs in fp32 (listed above as f32); most must be 16-bit.
half = sum(a.get("data") == want for a in algos)
if not algos or half * 2 <= len(algos):
    sys.exit(f"FAIL: {sys.argv[2]}: {half} of {len(algos)} convolution plans in {want} (report.json device.conv_algorithms)")
print(f"ok: {half} of {len(algos)} convolution plans in {want}")
PY
  fi
  compare_losses "$T/gpu-$precision.log" "$T/cpu-$precision.log" 1e-2 1e-2 3 || status=1
  compare_checkpoints --what params --tolerance 1e-2 "$T/gpu-$precision" "$T/cpu-$precision" || status=1
  apart=$(distance "$T/gpu-$precision" "$T/cpu-$precision")
  to_fp32=$(distance "$T/gpu-$precision" "$T/cpu-fp32-$precision")
  from_fp32=$(distance "$T/cpu-fp32-$precision" "$T/cpu-$precision")
  echo "$precision: GPU from the CPU's $precision ${apart:-?}, from the CPU's fp32 ${to_fp32:-?}; the CPU's fp32 from its $precision ${from_fp32:-?} (relative L2 of the parameters)"
  "$PY" -c "import sys; a, f = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if a < f else 1)" \
    "${apart:-nan}" "${to_fp32:-nan}" ||
    { echo "FAIL: $precision on --device $DEV is not closer to the CPU's $precision than to its fp32: its rounding is not the CPU's"; status=1; }
done

# 16-bit storage in the other model families, and --fuse bn-add-relu (issue 26, sections 2 and
# 3): transformer-tiny (linear and batched products on 16-bit operands, layer norm, attention) and
# ncf (embeddings, products, concatenation) 3 steps, and resnet20 with the fused batch norm + add +
# ReLU, and with it the fused batch norm + ReLU (--fuse bn-add-relu,bn-relu: cuDNN's BN_ACTIVATION
# kernels on a GPU in fp16), each in the GPU's first mixed precision against the CPU's: losses
# within 1e-2, parameters within 2e-2 relative L2, and report.json's activation_dtype the 16-bit type.
first=${precisions[0]}
# ST_GPU_TEST_AMP_OTHERS=0 leaves them out (the harness's run that must fail on resnet20 alone).
others=()
if [ "${ST_GPU_TEST_AMP_OTHERS:-1}" != 0 ]; then
  "$BIN/scaletrain-data" synthetic --task translation --kind reverse --sentences 400 --val-sentences 8 --words 20 \
    --max-length 10 --seed 3 --output "$T/text" >/dev/null
  "$BIN/scaletrain-data" synthetic --task recommendation --users 300 --items 400 --groups 10 --positives-per-user 8 \
    --eval-negatives 20 --output "$T/ratings" >/dev/null
  others=(
    "transformer|--model transformer-tiny --data $T/text --batch-tokens 256 --epochs 1 --max-steps 3 --log-every 1 --eval-every 0 --seed 11"
    "ncf|--model ncf --data $T/ratings --batch-size 128 --epochs 1 --max-steps 3 --log-every 1 --eval-every 0 --seed 11"
    "resnet20-fused|${base[*]}"
    "resnet20-bn-relu|${base[*]} --fuse bn-add-relu,bn-relu"
  )
fi
for entry in ${others[@]+"${others[@]}"}; do
  name=${entry%%|*}
  read -r -a args <<<"${entry#*|}"
  # resnet20-fused: the GPU fuses by default in amp-fp16 (--fuse auto), the CPU when asked.
  gpu_fuse=() cpu_fuse=()
  if [ "$name" = resnet20-fused ]; then
    cpu_fuse=(--fuse bn-add-relu)
    [ "$DEV" = cuda ] && [ "$first" = amp-fp16 ] || gpu_fuse=(--fuse bn-add-relu)
  fi
  run_train "gpu-$name" 1 "$DEV" "$TEST_ARGS" "${args[@]}" --precision "$first" ${gpu_fuse[@]+"${gpu_fuse[@]}"}
  run_train "cpu-$name" 1 cpu "" "${args[@]}" --precision "$first" ${cpu_fuse[@]+"${cpu_fuse[@]}"}
  compare_losses "$T/gpu-$name.log" "$T/cpu-$name.log" 1e-2 1e-2 3 || status=1
  compare_checkpoints --what params --tolerance 2e-2 "$T/gpu-$name" "$T/cpu-$name" || status=1
  "$PY" - "$T/gpu-$name/report.json" "$first" <<'PY' || status=1
import json, sys
got = json.load(open(sys.argv[1]))["activation_dtype"]
want = {"amp-fp16": "float16", "amp-bf16": "bfloat16"}[sys.argv[2]]
if got != want:
    sys.exit(f"FAIL: activations stored in {got}, not {want}")
print(f"ok: activations stored in {got}")
PY
done
if [ "$DEV" = cuda ] && [ "$first" = amp-fp16 ] && [ ${#others[@]} -gt 0 ]; then
  grep -q "^fusion: each residual block ends with one op.*(--fuse auto: amp-fp16 on a GPU)" "$T/gpu-resnet20-fused.log" ||
    { echo "FAIL: the GPU's amp-fp16 run did not fuse by default (--fuse auto): $(grep -n fusion "$T/gpu-resnet20-fused.log")"; status=1; }
  "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(0 if r["fuse"] == "bn-add-relu" else "FAIL: report.json fuse " + r["fuse"])' \
    "$T/gpu-resnet20-fused/report.json" || status=1
fi
[ $status = 0 ] || fail "mixed precision on --device $DEV ${TEST_ARGS:+($TEST_ARGS) }differs from the CPU's (above)"
echo "PASS"
