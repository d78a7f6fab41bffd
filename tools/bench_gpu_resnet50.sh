#!/usr/bin/env bash
# bench_gpu_resnet50.sh: ResNet-50 training throughput of scaletrain on one GPU at batch 64 and
# 128, beside PyTorch's on the same GPU with the same batch and SGD settings, TF32 off and on
# (tools/bench_torch_resnet50_gpu.py; issue 10, section 7). Synthetic 224x224x3 images, 1000
# classes, --no-augment (normalisation only): the GPU's work is measured, not the host's crop and
# flip. scaletrain runs each batch size in plain fp32 (its default: docs/architecture.md, "fp32
# means fp32 on a GPU") and with --tf32, to be read against PyTorch's TF32-off and TF32-on figures.
# BENCH_PRECISIONS (default fp32) adds the mixed precisions (issue 26, section 6): amp-fp16 and
# amp-bf16 runs of ours (--precision, dynamic loss scaling in fp16) against PyTorch's
# torch.autocast with channels_last and SGD momentum (GradScaler in fp16), each with its peak GPU
# memory and, for the 16-bit runs, the fraction of the GPU's dense fp16 tensor peak reached
# (ResNet-50 training: about 24.6 GFLOP per image, ../shared/reference/FACTS.md).
#
# Run in the repository root; in the GPU bundle (gpu-check.sh's benches.sh) $BUNDLE/bin holds the
# programs. The figures go to stdout (gpu-check.sh's logs); data and runs to a temporary folder,
# not to $OUT_DIR, whose files the device tool carries back. BENCH_STEPS (default 40) steps per
# batch size; the rate is the median of the progress lines (--log-every BENCH_LOG_EVERY, default 10)
# after the first (cuDNN's algorithm search, the allocator's first allocations); BENCH_WARMUP
# (default 10) untimed steps for PyTorch. The GPU check (benches.sh) runs 20 steps, logged every 5. BENCH_DEVICE=cpu BENCH_IMAGE=32,32,3 make
# a dry run of the script on a machine without a GPU (PyTorch's part then does not run).
set -euo pipefail
BIN=${ST_BIN:-${BUNDLE:+$BUNDLE/bin}}
BIN=${BIN:-build/bin}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
steps=${BENCH_STEPS:-40}
log_every=${BENCH_LOG_EVERY:-10}
warmup=${BENCH_WARMUP:-10}
batches=${BENCH_BATCH_SIZES:-64 128}
batches=${batches//,/ }  # spaces or commas
precisions=${BENCH_PRECISIONS:-fp32}
precisions=${precisions//,/ }
device=${BENCH_DEVICE:-cuda}
image=${BENCH_IMAGE:-224,224,3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Enough training images that every run's steps fit in one epoch (at least 1280, 190 MB at
# 224x224): an epoch's end and the next one's start (the train loss's all-reduce, the loader's
# first batch, which nothing overlaps) then fall outside the timed windows, as PyTorch's loop,
# which has no epochs, has none. With 1280 images a batch of 256 made 5-step epochs, and the one
# timed window of the GPU check's 10 steps held an epoch start: 4,201 images/s against 4,444 from
# the same run's median step (2026-11-28, docs/performance.md).
largest=0
for b in $batches; do [ "$b" -gt "$largest" ] && largest=$b; done
samples=$(( (steps + 1) * largest > 1280 ? (steps + 1) * largest : 1280 ))
"$BIN/scaletrain-data" synthetic --task image_classification --samples "$samples" --val-samples 64 --image-size "$image" \
  --classes 1000 --shards 4 --output "$out/data" >/dev/null
# The GPU's dense fp16 tensor-core peak in TFLOP/s, from its name (SXM parts; 0: not known).
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
case "$gpu_name" in
  *V100*) peak=125 ;;
  *A100*) peak=312 ;;
  *H100* | *H200* | *GH200*) peak=989 ;;
  *) peak=0 ;;
esac
# MODE per run: fp32 with TF32 off and on, or a mixed precision.
modes=()
for p in $precisions; do
  case "$p" in
    fp32) modes+=(fp32 fp32-tf32) ;;
    amp-fp16 | amp-bf16) modes+=("$p") ;;
    *) echo "BENCH_PRECISIONS: '$p' is not fp32, amp-fp16 or amp-bf16" >&2; exit 2 ;;
  esac
done
# BENCH_FUSE: precisions also run with --fuse bn-add-relu (issue 26, section 3), beside the
# unfused run (--fuse none; auto would fuse amp-fp16), to decide whether the fusion pays.
# BENCH_BN_SPATIAL: precisions also run unfused with cuDNN's plain SPATIAL batch norm
# (SCALETRAIN_CUDNN_BN_MODE=spatial) beside the persistent NHWC kernels the GPU runs by default.
fused=${BENCH_FUSE:-}
for p in ${fused//,/ }; do modes+=("$p-fused"); done
# BENCH_BN_RELU: precisions also run with --fuse bn-add-relu,bn-relu (every batch norm with a ReLU
# after it fused too: cuDNN's BN_ACTIVATION kernels), beside the bn-add-relu run.
bn_relu=${BENCH_BN_RELU:-}
for p in ${bn_relu//,/ }; do modes+=("$p-bnrelu"); done
spatial=${BENCH_BN_SPATIAL:-}
for p in ${spatial//,/ }; do modes+=("$p-spatial"); done
# BENCH_CONV_SEARCH: precisions also run with --conv-algo search (cuDNN times its convolution
# algorithms per shape, as PyTorch's cudnn.benchmark does in its runs here), with the default
# --fuse (auto: fused in amp-fp16), beside the heuristics' choice.
search=${BENCH_CONV_SEARCH:-}
for p in ${search//,/ }; do modes+=("$p-search"); done
# BENCH_CONV_GRAPH: precisions also run with --conv-algo graph (cuDNN's graph API: its engines, the
# ones PyTorch's cuDNN path takes, by its heuristics; default --fuse), and BENCH_CONV_GRAPH_SEARCH
# with --conv-algo graph-search (the engines timed), beside the legacy API's runs above. Each run's
# summary says per direction how many shapes the graph API ran and which fell back.
graph=${BENCH_CONV_GRAPH:-}
for p in ${graph//,/ }; do modes+=("$p-graph"); done
graph_search=${BENCH_CONV_GRAPH_SEARCH:-}
for p in ${graph_search//,/ }; do modes+=("$p-graphsearch"); done
# BENCH_BEST: precisions also run with everything built to make a step faster, together: both
# batch-norm fusions, the graph API's engines timed (graph-search) and backward free to take a
# nondeterministic algorithm (--conv-nondeterministic, as PyTorch's default).
best_flags=(--fuse bn-add-relu,bn-relu --conv-algo graph-search --conv-nondeterministic)
best=${BENCH_BEST:-}
for p in ${best//,/ }; do modes+=("$p-best"); done
# BENCH_OP_TIMES: precisions also run with --op-times and BENCH_BEST's flags, apart from the timed
# runs (the marks cost host time), for the time of every op per step of the fastest setting;
# PyTorch's runs of them are then profiled (their kernels per step), to read side by side.
op_times=${BENCH_OP_TIMES:-}
for p in ${op_times//,/ }; do modes+=("$p-optimes"); done
# PyTorch's baseline first, so that a setting of ours that runs long (a graph search's first step
# times engines for every shape) cannot leave the call without it.
if [ "$device" = cuda ]; then
  python3 "$(dirname "$0")/bench_torch_resnet50_gpu.py" --batch-sizes "$(echo $batches | tr ' ' ',')" --steps "$steps" \
    --warmup "$warmup" --precisions "$(echo $precisions | tr ' ' ',')" --peak-tflops "$peak" --profile "${op_times// /,}" |
    tee "$out/torch.txt"
fi
# A run that fails, or runs past BENCH_RUN_TIMEOUT seconds (default 120), is reported and the
# others go on (the newest settings run last): the script exits 1 at the end.
run_timeout=${BENCH_RUN_TIMEOUT:-120}
failed=0
for b in $batches; do
 for mode in "${modes[@]}"; do
  per_epoch=$((samples / b))
  epochs=$(((steps + per_epoch - 1) / per_epoch))
  flags=() bn_mode=""
  case "$mode" in
    fp32-tf32) flags=(--tf32) ;;
    *-fused) flags=(--precision "${mode%-fused}" --fuse bn-add-relu) ;;
    *-bnrelu) flags=(--precision "${mode%-bnrelu}" --fuse bn-add-relu,bn-relu) ;;
    *-best) flags=(--precision "${mode%-best}" "${best_flags[@]}") ;;
    *-spatial) flags=(--precision "${mode%-spatial}" --fuse none) bn_mode=spatial ;;
    *-graphsearch) flags=(--precision "${mode%-graphsearch}" --conv-algo graph-search) ;;
    *-graph) flags=(--precision "${mode%-graph}" --conv-algo graph) ;;
    *-search) flags=(--precision "${mode%-search}" --conv-algo search) ;;
    *-optimes) flags=(--precision "${mode%-optimes}" "${best_flags[@]}" --op-times) ;;
    amp-*) flags=(--precision "$mode" --fuse none) ;;
  esac
  SCALETRAIN_CUDNN_BN_MODE=$bn_mode timeout -k 5 "$run_timeout" mpirun -np 1 --bind-to none -x SCALETRAIN_CUDNN_BN_MODE "$BIN/scaletrain" train --device "$device" --model resnet50 --data "$out/data" \
    --output-dir "$out/run-$b" --overwrite "${flags[@]}" --batch-size "$b" --epochs "$epochs" --max-steps "$steps" \
    --base-lr 0.1 --lr-schedule constant --warmup-epochs 0 --momentum 0.9 --weight-decay 5e-5 \
    --label-smoothing 0.1 --no-augment --data-threads 8 --eval-every 0 --log-every "$log_every" >"$out/run-$b.log" 2>&1 ||
    { tail -30 "$out/run-$b.log"; echo "scaletrain resnet50 batch $b $mode: FAILED"; failed=1; continue; }
  grep -q "device: $device" "$out/run-$b.log" ||
    { echo "scaletrain resnet50 batch $b $mode: did not run on $device"; failed=1; continue; }
  python3 - "$out/run-$b.log" "$b" "$device" "$mode" "$log_every" "$peak" "$out/run-$b/report.json" "$out/ours.txt" <<'PY'
import json, re, statistics, sys
rates = [float(r) for r in re.findall(r"([0-9.]+) samples/s", open(sys.argv[1]).read())]
if len(rates) < 2:
    sys.exit(f"scaletrain resnet50 batch {sys.argv[2]}: too few progress lines ({len(rates)})")
mode, rate, peak = sys.argv[4], statistics.median(rates[1:]), float(sys.argv[6])
label = {"fp32": "fp32, tf32 off", "fp32-tf32": "fp32, tf32 on"}.get(mode, mode)
tensor = ""
if mode.startswith("amp") and peak > 0:
    tensor = f"; {rate * 24.6e9 / 1e12:.1f} TFLOP/s, {100 * rate * 24.6e9 / (peak * 1e12):.1f}% of the dense fp16 tensor peak ({peak:.0f})"
print(f"scaletrain resnet50 batch {sys.argv[2]} on {sys.argv[3]}, {label}: {rate:.1f} images/s "
      f"(median of {len(rates) - 1} windows of {sys.argv[5]} steps, after the first){tensor}")
# The same run's rate from its median step (report.json), for the table at the end.
median = (json.load(open(sys.argv[7])).get("step_time") or {}).get("median_p50_s")
by_median = f"{int(sys.argv[2]) / median:.1f}" if median else "-"
with open(sys.argv[8], "a") as table:
    table.write(f"{sys.argv[2]}\t{mode}\t{rate:.1f}\t{by_median}\n")
PY
  python3 "$(dirname "$0")/gpu_run_summary.py" "$out/run-$b/report.json" || true
  rm -rf "$out/run-$b/checkpoints"  # 200 MB each
 done
done
# Every setting of ours beside PyTorch's run of the same batch and precision: the window rate and
# the rate from the run's median step, and their ratios to PyTorch's.
python3 - "$out/ours.txt" "$out/torch.txt" <<'PY' || true
import re, sys
torch = {}
try:
    for line in open(sys.argv[2]):
        m = re.match(r"torch resnet50 batch (\d+) (\S+): ([0-9.]+) images/s", line)
        if m:
            torch[(m.group(1), m.group(2))] = float(m.group(3))
except OSError:
    pass
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
print("scaletrain against PyTorch (images/s; ratio):")
print(f"  {'batch':>5} {'setting':<22} {'window':>9} {'median step':>12} {'PyTorch':>9} {'ratio':>13}")
for batch, mode, window, by_median in rows:
    precision = next((p for p in ("amp-fp16", "amp-bf16") if mode.startswith(p)), None)
    ref = torch.get((batch, precision)) if precision else None
    ratio = "-"
    if ref:
        ratio = f"{float(window) / ref:.2f}x"
        if by_median != "-":
            ratio += f", {float(by_median) / ref:.2f}x"
    print(f"  {batch:>5} {mode:<22} {window:>9} {by_median:>12} {ref if ref else '-':>9} {ratio:>13}")
PY
[ "$failed" = 0 ] || { echo "bench_gpu_resnet50.sh: a scaletrain run failed (above)"; exit 1; }
