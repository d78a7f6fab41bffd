#!/usr/bin/env bash
# ResNet-20 trained 50 steps on the GPU and on the CPU from the same weights and the same batches
# (one seed; issue 10, section 6): rank 0's loss agrees at every step and the final weights and
# batch-norm statistics agree, within the tolerances below. Also the GPU run with --input-copy
# inline against the default overlap (issue 26, section 4), and --op-times on both runs (it times,
# and changes nothing): the same calls per step of the model's ops on both devices, the GPU's
# time from CUDA events within its phases' time; the GPU's peak tensor memory against the CPU
# run's. Skips (77) without a GPU.
source "$(dirname "$0")/lib.sh"
require_gpu
T=$TMP_ROOT/gpu_resnet20_training
rm -rf "$T" && mkdir -p "$T"
steps=${ST_GPU_TEST_STEPS:-50}
batch=${ST_GPU_TEST_BATCH:-32}
image=${ST_GPU_TEST_IMAGE:-32,32,3}

# One epoch of exactly `steps` batches; crop and flip augmentation on (it is drawn on the host
# from the seed, so both devices see the same pixels). A modest constant learning rate: the test
# is about arithmetic, not about reaching an accuracy, and a large rate makes the two runs'
# rounding differences grow faster than they need to.
synthetic_data "$T/data" $((steps * batch)) 64 "$image" 10
common=(--model resnet20 --data "$T/data" --epochs 1 --max-steps "$steps" --batch-size "$batch" --seed 7
  --base-lr 0.05 --lr-schedule constant --warmup-epochs 0 --momentum 0.9 --weight-decay 5e-4 --crop-padding 2
  --log-every 1 --eval-every 1)
run_train gpu 1 "$DEV" "$TEST_ARGS --op-times" "${common[@]}"
run_train cpu 1 cpu "--op-times" "${common[@]}"
# --op-times: the model's ops as often on both devices; on a GPU timed by CUDA events, the
# outermost ops' time within the GPU time of the phases that hold them.
"$PY" - "$T/gpu/report.json" "$T/cpu/report.json" "$DEV" <<'PY' || fail "report.json's op_times (above)"
import json, sys
gpu, cpu = (json.load(open(p)) for p in sys.argv[1:3])
g, c = gpu["op_times"], cpu["op_times"]
want_clock = "cuda_events" if sys.argv[3] == "cuda" else "host_clock"
if g["clock"] != want_clock or c["clock"] != "host_clock" or g["steps"] != c["steps"]:
    sys.exit(f"FAIL: op_times clocks {g['clock']} / {c['clock']}, steps {g['steps']} / {c['steps']}")
gc, cc = ({o["op"]: o["calls_per_step"] for o in t["ops"]} for t in (g, c))
model_ops = ("conv2d_forward", "conv2d_backward_data", "conv2d_backward_filter", "batch_norm_forward_training",
             "batch_norm_backward", "relu_forward", "relu_backward", "linear_forward", "linear_backward")
for op in model_ops:
    if gc.get(op) != cc.get(op) or not cc.get(op):
        sys.exit(f"FAIL: {op}: {gc.get(op)} calls per step on {sys.argv[3]}, {cc.get(op)} on the CPU")
top = g["top_level_ms_per_step"]
phases = gpu["device"].get("phases")
if sys.argv[3] == "cuda" and not phases:
    sys.exit("FAIL: a GPU run without device.phases")
if phases:
    in_phases = 1e3 * sum(phases[p]["per_step_after_first_s"] for p in ("forward", "backward", "optimizer"))
    if not 0 < top <= 1.05 * in_phases + 0.5:
        sys.exit(f"FAIL: {top:.3f} ms of ops per step, {in_phases:.3f} ms of GPU time in the phases")
    print(f"op times: {top:.3f} ms of ops in {in_phases:.3f} ms of GPU phases per step")
    # The allocator's peak in use: some, and within its peak reserved.
    in_use, reserved = gpu["device"].get("peak_in_use_bytes"), gpu["device"]["peak_memory_bytes"]
    if not in_use or not 0 < in_use <= reserved:
        sys.exit(f"FAIL: device.peak_in_use_bytes {in_use} against peak_memory_bytes {reserved}")
    print(f"peak GPU memory: {in_use / 2**20:.0f} MiB in use, {reserved / 2**20:.0f} MiB reserved")
# Peak tensor memory: the GPU holds the tensors the CPU run holds (the CPU counts its host tensors,
# the loader's batches among them), plus cuDNN's workspace and a margin, and no gradient buffer
# per layer: that doubled a ResNet's activations. Both in fp32.
gm, cm = gpu["device"].get("peak_in_use_bytes"), cpu["device"].get("peak_in_use_bytes")
workspace = max((a["workspace_bytes"] for a in gpu["device"].get("conv_algorithms") or []), default=0)
if not gm or not cm or gm > cm + workspace + 64 * 2**20:
    sys.exit(f"FAIL: peak in use {gm} bytes on {sys.argv[3]}, {cm} on the CPU, cuDNN workspace up to {workspace}")
print(f"peak tensor memory in use: {gm / 2**20:.1f} MiB on {sys.argv[3]}, {cm / 2**20:.1f} MiB on the CPU")
print("op times, longest on " + sys.argv[3] + ": " +
      ", ".join(f"{o['op']} {o['ms_per_step']:.3f} ms" for o in g["ops"][:5]))
PY
[ "$DEV" != cuda ] || grep -q "device: cuda" "$T/gpu.log" || fail "the GPU run did not say it ran on cuda: $(head -30 "$T/gpu.log")"
# What cuDNN chose per convolution shape is in report.json; without --tf32 every choice runs FMA math.
if [ "$DEV" = cuda ]; then
  "$PY" - "$T/gpu/report.json" "$TEST_ARGS" <<'PY' || fail "report.json's device.conv_algorithms (above)"
import collections, json, sys
algos = json.load(open(sys.argv[1]))["device"].get("conv_algorithms") or []
if not algos:
    sys.exit("FAIL: report.json has no device.conv_algorithms")
count = collections.Counter((a["direction"], a["algo"], a["math"], a["deterministic"]) for a in algos)
for (direction, algo, math, det), n in sorted(count.items()):
    print(f"cuDNN {direction}: algo {algo}, math {math}, deterministic {det}: {n} shape(s)")
if "--tf32" not in sys.argv[2] and any(a["math"] != "fma" for a in algos):
    sys.exit("FAIL: a convolution without --tf32 runs another math than fma")
PY
  # The GPU's time per step without the warm-up step: positive, and over the other steps no more
  # than the segment's total (which holds the first step too).
  "$PY" - "$T/gpu/report.json" "$steps" <<'PY' || fail "report.json's device.phases (above)"
import json, sys
phases, steps = json.load(open(sys.argv[1]))["device"]["phases"], int(sys.argv[2])
for name in ("forward", "backward", "optimizer"):
    p = phases[name]
    after = p.get("per_step_after_first_s")
    if after is None or not after > 0 or after * (steps - 1) > p["mean_s"] * (1 + 1e-9):
        sys.exit(f"FAIL: device.phases.{name}: per_step_after_first_s {after} against mean_s {p['mean_s']} over {steps} steps")
    print(f"GPU {name}: {after * 1e3:.2f} ms per step after the first, {p['mean_s'] * 1e3:.1f} ms in all")
PY
fi
# --input-copy (issue 26, section 4): the GPU run above copied each next batch on the copy stream
# while the step computed (overlap, the default on a GPU). The same run with each batch copied on
# the compute stream when its step starts must see the same batches: its first 5 losses within
# 1e-4 (a batch read before its copy had landed, or the wrong buffer, changes a loss by about
# 1e-2). report.json says which ran, and the overlap's copies.
if [ "$DEV" = cuda ]; then
  run_train gpu_inline 1 "$DEV" "$TEST_ARGS --input-copy inline" "${common[@]}"
  compare_losses "$T/gpu.log" "$T/gpu_inline.log" 1e-4 1e-6 5 || fail "--input-copy overlap and inline differ (above)"
  "$PY" - "$T/gpu/report.json" "$T/gpu_inline/report.json" "$steps" <<'PY' || fail "report.json's data.input_copy (above)"
import json, sys
overlap = json.load(open(sys.argv[1]))["data"]["input_copy"]
inline = json.load(open(sys.argv[2]))["data"]["input_copy"]
steps = int(sys.argv[3])
print("input_copy:", overlap, inline)
if overlap["used"] != "overlap" or overlap["batches"] != steps or overlap["copies"] != 2 * steps:
    sys.exit(f"FAIL: the default GPU run did not copy its {steps} batches ahead: {overlap}")
if overlap["serialized"] != 2:
    sys.exit(f"FAIL: more than the two buffers' first copies waited for compute: {overlap}")
if inline["used"] != "inline":
    sys.exit(f"FAIL: --input-copy inline ran {inline}")
PY
  grep -q "^input: .*the next batch copied to the GPU on the copy stream while the step computes" "$T/gpu.log" ||
    fail "no overlap in the GPU run's input line: $(grep '^input' "$T/gpu.log")"
fi
# One rank on a GPU has nothing to all-reduce: no staging through the host (make_single_rank_reducer).
if [ "$DEV" = cuda ]; then
  grep -q "all-reduce: none: one rank" "$T/gpu.log" ||
    fail "the one-rank GPU run did not skip the all-reduce: $(grep -m1 'all-reduce:' "$T/gpu.log")"
fi

# Tolerances. Both sides compute in fp32, but not the same sums in the same order: cuDNN picks its
# convolution algorithms and reduction orders, oneDNN its own. The first step differs in the last
# bits; SGD with momentum and batch norm then amplify the difference step after step (the training
# trajectory is chaotic), so after tens of steps two correct runs are on different trajectories.
# Measured on an H200 (2026-11-26, docs/gpu.md): PyTorch's own fp32 GPU run against its CPU run
# of this model and recipe (tools/torch_gpu_cpu_divergence.py) is 7.8e-6 apart in the parameters
# after step 1, 6.6e-2 after step 10 and 3.7e-1 after step 50 (batch-norm statistics 1.3); ours,
# 1.3e-1 and 2.8e-1 after 50 steps. So the run is checked where each check can hold:
#   arithmetic: the first 3 steps' losses within 1e-3 x |loss| + 1e-3 (the forward of step 1 from
#               the same weights, then two updates: the trajectories have not parted yet);
#   learning:   the mean loss of the last 10 steps within 10% of the CPU's, and below step 1's;
#   state:      parameters within 0.3 and batch-norm statistics within 0.6 relative L2 after the
#               50 steps: a gross error (a skipped update, a stale or zero gradient, statistics
#               never updated) is O(1) there, beyond any drift.
status=0
compare_losses "$T/gpu.log" "$T/cpu.log" 1e-3 1e-3 3 || status=1
compare_learning "$T/gpu.log" "$T/cpu.log" "$((steps < 10 ? steps : 10))" 0.1 || status=1
compare_checkpoints --what params --tolerance 0.3 "$T/gpu" "$T/cpu" || status=1
compare_checkpoints --what buffers --tolerance 0.6 "$T/gpu" "$T/cpu" || status=1
[ $status = 0 ] || fail "resnet20 on --device $DEV ${TEST_ARGS:+($TEST_ARGS) }differs from the CPU run (above)"
echo "PASS"
