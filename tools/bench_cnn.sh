#!/usr/bin/env bash
# CPU training throughput of the ImageNet CNNs (issue 24: alexnet, googlenet, inception_v3,
# alexnet-caffe, googlenet-caffe; resnet50 for reference), scaletrain against PyTorch 1.13 side by
# side in one run, and each model's all-reduce bytes against its compute time per step
# (docs/performance.md, "The ImageNet CNNs (issue 24)").
#
# Each round runs, for each model, scaletrain and then PyTorch, one right after the other:
#   scaletrain: 1 rank x 2 threads (started without mpirun: Open MPI would bind a lone rank to one
#     core), synthetic raw images at the model's input size (224, 227 for alexnet-caffe, 299 for
#     inception_v3; scaletrain-data synthetic), --no-augment, 1 data thread, the model's defaults
#     (SGD momentum 0.9, weight decay 5e-5, the auxiliary heads' --aux-loss-weight, Caffe
#     preprocessing for the -caffe models) with --base-lr 0.01 --lr-schedule constant;
#   PyTorch: tools/torch_cnn_baseline.py, 1 process x 2 threads, the same model (torchvision 0.14's
#     or the Caffe replicas of tests/python/torch_reference.py), batch, loss (auxiliary heads at the
#     same weights), SGD and input size, on one synthetic batch made before the clock.
# Both run STEPS steps of BATCH images; the figure is the median step time over the steps after
# the first (scaletrain: report.json step_time p50, which leaves the first step out; PyTorch: the
# same). images/s = BATCH / median step. The ratio of each round is taken first, then the median.
# The scaletrain runs also give parameters, allreduce_bytes_per_step (fp32 gradients) and
# step_split.compute_s (compute per step, first step left out), for the all-reduce table.
#
#   tools/bench_cnn.sh [ROUNDS] [STEPS] [BATCH]     (defaults 3, 5, 4; make bench-cnn)
#   tools/bench_cnn.sh --summary                    (the tables again from OUT/results.jsonl,
#                                                    e.g. of an interrupted run: complete rounds only)
# About 10 minutes on the quiet 2-core development VM with the defaults (estimated); 20 minutes under
# load 8-12 from other engineers' builds (measured, 2026-11-26; docs/performance.md).
# env: BIN=build/bin OUT=build/bench_cnn (datasets, results.jsonl, logs)
#      RUNS=/dev/shm/... (run directories, removed after each run: the final checkpoint of
#      alexnet is ~490 MB) MODELS="alexnet googlenet ..." (a subset)
set -euo pipefail
cd "$(dirname "$0")/.."
summary_only=0
[ "${1:-}" = "--summary" ] && { summary_only=1; shift; }
rounds=${1:-3}
steps=${2:-5}
batch=${3:-4}
BIN=${BIN:-build/bin} OUT=${OUT:-build/bench_cnn}
PY=${PY:-/usr/bin/python3}
MODELS=${MODELS:-"alexnet googlenet inception_v3 alexnet-caffe googlenet-caffe resnet50"}
runs_parent=/tmp
[ -d /dev/shm ] && [ -w /dev/shm ] && runs_parent=/dev/shm
if [ -z "${RUNS:-}" ]; then  # our own scratch folder, removed at exit (a given RUNS is left alone)
  RUNS=$(mktemp -d "$runs_parent/bench_cnn.XXXXXX")
  trap 'rm -rf "$RUNS"' EXIT
fi
mkdir -p "$RUNS"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -x "$BIN/scaletrain" ] || { echo "bench_cnn: no $BIN/scaletrain (build first)" >&2; exit 2; }
mkdir -p "$OUT/logs"
results=$OUT/results.jsonl

if [ "$summary_only" = 0 ]; then
: >"$results"
echo "== machine and libraries ($(date -u '+%Y-%m-%d %H:%M UTC'))"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "scaletrain: $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $BIN/scaletrain"
echo "-- update-alternatives --display libblas.so.3-x86_64-linux-gnu"
update-alternatives --display libblas.so.3-x86_64-linux-gnu 2>&1 || echo "(no libblas.so.3 alternative)"
echo "-- torch.__config__.show() and the BLAS a matrix product loads (tools/torch_blas.py)"
"$PY" - <<'PY'
import os, sys
sys.path.insert(0, "tools")
import torch, torchvision
from torch_blas import require_fast_blas
print(f"torch {torch.__version__}, torchvision {torchvision.__version__}")
print(torch.__config__.show().strip())
require_fast_blas("bench_cnn")
PY
echo "== rounds: $rounds, steps per run: $steps (median over steps 2..$steps), batch $batch, 1 process x 2 threads each"

input_size() {
  case $1 in inception_v3) echo 299 ;; alexnet-caffe) echo 227 ;; *) echo 224 ;; esac
}
samples=$((batch * steps))
for m in $MODELS; do
  s=$(input_size "$m")
  d=$OUT/data-$s
  # Enough samples for all steps in one epoch; 2 validation images keep the final evaluation short.
  if [ ! -f "$d/val/manifest.json" ] || [ "$(cat "$d/.samples" 2>/dev/null)" != "$samples" ]; then
    "$BIN/scaletrain-data" synthetic --samples "$samples" --val-samples 2 --image-size "$s,$s,3" --classes 1000 \
      --output "$d" --overwrite >/dev/null
    echo "$samples" >"$d/.samples"
  fi
done

st_run() {  # model round
  local dir=$RUNS/$1-r$2 log=$OUT/logs/st-$1-r$2.log
  "$BIN/scaletrain" train --model "$1" --data "$OUT/data-$(input_size "$1")" --batch-size "$batch" --threads 2 \
    --max-steps "$steps" --no-augment --base-lr 0.01 --lr-schedule constant --eval-every 1000 --log-every 0 \
    --output-dir "$dir" >"$log" 2>&1 || { echo "bench_cnn: scaletrain $1 failed, see $log" >&2; exit 1; }
  "$PY" - "$dir/report.json" "$1" "$2" "$results" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["step_time"]["per_rank"][0]
rec = {"model": sys.argv[2], "round": int(sys.argv[3]), "side": "scaletrain", "batch": r["global_batch_size"],
       "step_s": t["p50_s"], "mean_s": t["mean_s"], "max_s": t["max_s"], "steps_timed": t["steps"], "steps": r["steps"],
       "images_per_s": r["global_batch_size"] / t["p50_s"], "parameters": r["parameters"],
       "allreduce_bytes_per_step": r["allreduce_bytes_per_step"], "step_split": r["step_split"],
       "phases_s": {k: v["mean_s"] for k, v in r["phases"].items()}, "load1": float(sys.argv[5])}
open(sys.argv[4], "a").write(json.dumps(rec) + "\n")
print(f"{rec['images_per_s']:.2f}")
PY
  rm -rf "$dir"
}

torch_run() {  # model round
  local out log=$OUT/logs/torch-$1-r$2.log
  "$PY" tools/torch_cnn_baseline.py --model "$1" --threads 2 --batch-size "$batch" --steps "$steps" >"$log" 2>&1 ||
    { echo "bench_cnn: PyTorch $1 failed, see $log" >&2; exit 1; }
  "$PY" - "$log" "$1" "$2" "$batch" "$results" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import json, re, sys
out = open(sys.argv[1]).read()
f = re.search(r"^step_ms ([0-9.]+) mean ([0-9.]+) min ([0-9.]+) max ([0-9.]+) steps (\d+)", out, re.M)
batch = int(sys.argv[4])
rec = {"model": sys.argv[2], "round": int(sys.argv[3]), "side": "pytorch", "batch": batch,
       "step_s": float(f.group(1)) / 1e3, "mean_s": float(f.group(2)) / 1e3,
       "min_s": float(f.group(3)) / 1e3, "max_s": float(f.group(4)) / 1e3, "steps_timed": int(f.group(5)),
       "images_per_s": batch / (float(f.group(1)) / 1e3), "load1": float(sys.argv[6])}
open(sys.argv[5], "a").write(json.dumps(rec) + "\n")
print(f"{rec['images_per_s']:.2f}")
PY
}

start=$SECONDS
for r in $(seq "$rounds"); do
  for m in $MODELS; do
    a=$(st_run "$m" "$r")
    b=$(torch_run "$m" "$r")
    echo "round $r $m: scaletrain $a, pytorch $b images/s (load $(cut -d' ' -f1 /proc/loadavg), $((SECONDS - start)) s)"
  done
done

fi  # summary_only

"$PY" - "$results" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
med = statistics.median
models = list(dict.fromkeys(r["model"] for r in recs))
def side(m, s):
    return {r["round"]: r for r in recs if r["model"] == m and r["side"] == s}
print("\nTraining images/s, 1 process x 2 threads each; median of rounds (runs in brackets); the ratio is the"
      " median of the rounds' ratios")
print("| model | batch | scaletrain images/s | PyTorch 1.13 images/s | scaletrain / PyTorch | rounds |")
print("|---|---|---|---|---|---|")
for m in models:
    st, pt = side(m, "scaletrain"), side(m, "pytorch")
    rs = sorted(set(st) & set(pt))
    a = [st[k]["images_per_s"] for k in rs]
    b = [pt[k]["images_per_s"] for k in rs]
    ratio = [x / y for x, y in zip(a, b)]
    fmt = lambda v: ", ".join(f"{x:.2f}" for x in v)  # noqa: E731
    print(f"| {m} | {st[rs[0]]['batch']} | {med(a):.2f} ({fmt(a)}) | {med(b):.2f} ({fmt(b)}) | {med(ratio):.2f} "
          f"({', '.join(f'{x:.2f}' for x in ratio)}) | {len(rs)} |")
print("\nAll-reduce against compute (scaletrain runs above; compute = report.json step_split.compute_s, median of"
      " rounds; fp32 gradients)")
print("| model | parameters | batch | all-reduce MB / step | compute ms / step | MB per compute ms |"
      " forward / backward / optimizer ms per step (all steps) |")
print("|---|---|---|---|---|---|---|")
for m in models:
    st = list(side(m, "scaletrain").values())
    mb = st[0]["allreduce_bytes_per_step"] / 1e6
    c = med([r["step_split"]["compute_s"] for r in st]) * 1e3
    ph = {k: med([r["phases_s"][k] for r in st]) for k in ("forward", "backward", "optimizer")}
    per = lambda k: ph[k] * 1e3 / st[0]["steps"]  # noqa: E731  (whole run, first step included)
    print(f"| {m} | {st[0]['parameters']:,} | {st[0]['batch']} | {mb:.1f} | {c:.0f} | {mb / c:.3f} | "
          f"{per('forward'):.0f} / {per('backward'):.0f} / {per('optimizer'):.0f} |")
print(f"\nload average (1 min) at the runs' ends: {min(r['load1'] for r in recs):.1f} to "
      f"{max(r['load1'] for r in recs):.1f}")
PY
echo "raw records: $results"
