#!/usr/bin/env bash
# ResNet-50: one SGD step on the GPU and on the CPU from the same weights and the same batch (issue
# 10, section 6): the update w1 - w0 agrees, as a relative L2 error over all parameters, within
# the tolerance below. Small synthetic images keep the CPU side to seconds; ResNet-50's shapes
# (bottlenecks, strided 1x1 and 3x3 convolutions, the 7x7 stem, max pool) are all there.
# The GPU step runs three times: with cuDNN's heuristics' algorithms (the default), with --conv-algo
# search (cuDNN times each algorithm per shape; report.json must say every plan was chosen so) and
# with --conv-algo graph-search and --conv-nondeterministic (cuDNN's graph API, its engines timed
# per shape, backward free to take a nondeterministic one; report.json must say the graph API ran
# some plans, and why any fell back), all held to the same tolerance. Skips (77) without a GPU.
source "$(dirname "$0")/lib.sh"
require_gpu
T=$TMP_ROOT/gpu_resnet50_step
rm -rf "$T" && mkdir -p "$T"
batch=${ST_GPU_TEST_BATCH:-16}
image=${ST_GPU_TEST_IMAGE:-64,64,3}

synthetic_data "$T/data" $((4 * batch)) 16 "$image" 10
# Constant rate, no warmup: step 1 uses --base-lr itself. Label smoothing and weight decay on, as in
# MLPerf's recipe, so that their gradients are in the update too.
common=(--model resnet50 --data "$T/data" --epochs 1 --max-steps 1 --batch-size "$batch" --seed 11
  --lr-schedule constant --warmup-epochs 0 --momentum 0.9 --weight-decay 5e-5 --label-smoothing 0.1
  --log-every 1 --eval-every 0)
run_train gpu 1 "$DEV" "$TEST_ARGS" "${common[@]}" --base-lr 0.1
run_train gpu-search 1 "$DEV" "$TEST_ARGS" "${common[@]}" --base-lr 0.1 --conv-algo search
run_train gpu-graph 1 "$DEV" "$TEST_ARGS" "${common[@]}" --base-lr 0.1 --conv-algo graph-search \
  --conv-nondeterministic
run_train cpu 1 cpu "" "${common[@]}" --base-lr 0.1
# w0: the run has no checkpoint before step 1, so take step 1 of a run whose rate is so small
# (1e-30) that w0 - 1e-30 * (g + wd * w0) rounds back to w0 in float32: the initial parameters.
run_train w0 1 cpu "" "${common[@]}" --base-lr 1e-30
[ "$DEV" != cuda ] || grep -q "device: cuda" "$T/gpu.log" || fail "the GPU run did not say it ran on cuda: $(head -30 "$T/gpu.log")"

# Tolerance: one step, no accumulation of differences, but the gradients at initialisation are
# small sums with large cancellations (batch norm's backward subtracts two sums over the rows and
# divides by the batch's standard deviation), so fp32 sums in cuDNN's order on one side and oneDNN's
# on the other differ in the update by more than their inputs do. Measured on an H200 (2026-11-26,
# docs/gpu.md): ours 4.8e-3 over all parameters (7.0e-3 in the worst tensor, a batch-norm bias);
# PyTorch's own fp32 GPU step against its CPU step on these shapes (tools/torch_gpu_cpu_divergence.py)
# 1.5e-2 (2.4e-2). 3e-2 holds both and still fails a real error: a learning rate 10% off on one side
# is an update error of 1e-1 (the harness checks it), a wrong or stale gradient far more. The loss
# of that one step (the forward pass before the update) must agree within 1e-3.
status=0
compare_checkpoints --what params --base "$T/w0" --tolerance 3e-2 "$T/gpu" "$T/cpu" || status=1
compare_losses "$T/gpu.log" "$T/cpu.log" 1e-3 1e-3 || status=1
compare_checkpoints --what params --base "$T/w0" --tolerance 3e-2 "$T/gpu-search" "$T/cpu" || status=1
compare_losses "$T/gpu-search.log" "$T/cpu.log" 1e-3 1e-3 || status=1
compare_checkpoints --what params --base "$T/w0" --tolerance 3e-2 "$T/gpu-graph" "$T/cpu" || status=1
compare_losses "$T/gpu-graph.log" "$T/cpu.log" 1e-3 1e-3 || status=1
if [ "$DEV" = cuda ]; then
  "$PY" - "$T/gpu-search/report.json" <<'PY' || status=1
import collections, json, sys
algos = json.load(open(sys.argv[1]))["device"].get("conv_algorithms") or []
count = collections.Counter((a["direction"], a["algo"], a.get("chosen_by")) for a in algos)
for (direction, algo, how), n in sorted(count.items()):
    print(f"--conv-algo search: cuDNN {direction}: algo {algo}, chosen by {how}: {n} shape(s)")
if not algos or any(a.get("chosen_by") != "search" for a in algos):
    sys.exit("FAIL: --conv-algo search: not every convolution plan was chosen by cuDNN's search (above)")
# Each searched plan carries cuDNN's measured times: the chosen algorithm's, and the fastest usable
# one's whatever its determinism, no slower than the chosen one.
bad = [a for a in algos if not (a.get("search_ms") or 0) > 0 or not 0 < (a.get("fastest_ms") or 0) <= a["search_ms"]]
if bad:
    sys.exit(f"FAIL: --conv-algo search: plans without consistent search times: {bad[:2]}")
for d in sorted({a["direction"] for a in algos}):
    mine = [a for a in algos if a["direction"] == d]
    print(f"--conv-algo search: {d}: {sum(a['search_ms'] for a in mine):.3f} ms chosen, "
          f"{sum(a['fastest_ms'] for a in mine):.3f} ms had determinism not mattered, over {len(mine)} shape(s)")
PY
  "$PY" - "$T/gpu-graph/report.json" <<'PY' || status=1
import collections, json, sys
algos = json.load(open(sys.argv[1]))["device"].get("conv_algorithms") or []
ran = [a for a in algos if a.get("chosen_by", "").startswith("graph")]
count = collections.Counter((a["direction"], a.get("engine"), a.get("chosen_by")) for a in ran)
for (direction, engine, how), n in sorted(count.items(), key=str):
    print(f"--conv-algo graph-search: cuDNN {direction}: engine {engine}, chosen by {how}: {n} shape(s)")
for a in algos:
    if not a.get("chosen_by", "").startswith("graph"):
        print(f"--conv-algo graph-search: {a['direction']} {a['input_nhwc']} {a['weight_oihw']} fell back: {a['chosen_by']}")
# ResNet-50's plain convolutions all have graph-API engines: a run in which none ran says that the
# graph path is broken (its reasons above), even though the legacy fallback kept the step right.
if not ran:
    sys.exit("FAIL: --conv-algo graph-search: the graph API ran none of the convolution plans (above)")
bad = [a for a in ran if a["chosen_by"] == "graph-search" and
       not (0 < (a.get("fastest_ms") or 0) <= (a.get("search_ms") or 0))]
if bad:
    sys.exit(f"FAIL: --conv-algo graph-search: plans without consistent search times: {bad[:2]}")
print(f"--conv-algo graph-search: the graph API ran {len(ran)} of {len(algos)} plans")
PY
else
  grep -qF -- "--conv-algo search has no effect on the CPU" "$T/gpu-search.log" ||
    { echo "FAIL: --conv-algo search on the CPU was not noted"; status=1; }
  grep -qF -- "--conv-algo graph-search has no effect on the CPU" "$T/gpu-graph.log" ||
    { echo "FAIL: --conv-algo graph-search on the CPU was not noted"; status=1; }
fi
[ $status = 0 ] || fail "resnet50's step on --device $DEV ${TEST_ARGS:+($TEST_ARGS) }differs from the CPU's (above)"
echo "PASS"
