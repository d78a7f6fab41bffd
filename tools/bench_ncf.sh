#!/usr/bin/env bash
# NCF (NeuMF, --model ncf) training throughput against PyTorch, side by side in one run, and the
# all-reduce bytes per step against compute time per step for ResNet-50 and NCF (issue 15, 6;
# docs/performance.md, "NCF (recommendation)").
#
# Part 1, throughput. Two synthetic recommendation datasets (scaletrain-data synthetic --task
# recommendation): ml-1m's user and item counts (6,040 x 3,706, 50 positives per user; 1.9M
# parameters) and ml-20m's (138,493 x 26,744, 6 positives per user; 31.8M parameters, the
# benchmark's embedding tables, so the dense gradient and Adam step are the real size). For each
# and for global batches 1024 and 65536 (MLPerf's reference batch), ROUNDS rounds alternate:
#   scaletrain, 1 rank x 2 threads (started without mpirun); PyTorch (tools/torch_ncf_baseline.py), 1 process x 2 threads;
#   scaletrain, 2 ranks x 1 thread (global batch split over the ranks).
# Same model (mf 64, MLP 256-256-128-64), same Adam (lr 0.0045, betas 0.25 / 0.5, eps 1e-8), 4
# negatives per positive, BCE-with-logits, dense embedding gradients, Adam over every parameter.
# Rates are steady-state samples/s: scaletrain's global batch / report.json step_split.step_s,
# PyTorch's steps after the first (both leave the warm-up step out); report.json's
# throughput.samples_per_s (first step and the epoch's negative sampling included) is kept too.
# Evaluation is out of both (1 evaluation negative per user keeps scaletrain's final evaluation
# short; it is not in train_time_s anyway).
#
# Part 2, all-reduce against compute: 2 ranks x 1 thread, ResNet-50 (1000 classes, 224x224x3
# synthetic images, 4 per rank) and NCF at ml-20m's sizes (batch 1024 and 65536 per rank):
# parameters, allreduce_bytes_per_step, step_split.compute_s, allreduce_time.per_step_s.
#
#   tools/bench_ncf.sh [ROUNDS]          (default 3; about 2 minutes a round on 2 cores)
# env: BIN=build/bin OUT=build/bench_ncf (datasets, runs and results.json)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
BIN=${BIN:-build/bin} OUT=${OUT:-build/bench_ncf}
PY=${PY:-/usr/bin/python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$OUT/runs"
results=$OUT/results.jsonl
: >"$results"

make_data() {  # name users items positives_per_user groups
  [ -f "$OUT/$1/val/manifest.json" ] && return
  "$BIN/scaletrain-data" synthetic --task recommendation --users "$2" --items "$3" --groups "$5" \
    --positives-per-user "$4" --eval-negatives 1 --output "$OUT/$1" --overwrite >/dev/null
}
make_data ml1m 6040 3706 50 20
make_data ml20m 138493 26744 6 50

# scaletrain: name data ranks threads global_batch steps round
st_run() {
  local dir=$OUT/runs/$1-r$7 per_rank=$(($5 / $3))
  rm -rf "$dir"
  # One rank runs without mpirun: Open MPI binds a lone rank to one core (bind-to core for np <= 2),
  # which would put both of its threads on that core.
  local launch=("$BIN/scaletrain")
  [ "$3" -gt 1 ] && launch=(mpirun --oversubscribe -np "$3" "$BIN/scaletrain")
  "${launch[@]}" train --model ncf --data "$OUT/$2" --batch-size "$per_rank" \
    --threads "$4" --max-steps "$6" --eval-every 1000 --log-every 0 --output-dir "$dir" >"$dir.log" 2>&1 ||
    { echo "bench_ncf: scaletrain failed, see $dir.log" >&2; exit 1; }
  "$PY" - "$dir/report.json" "$1" "$7" "$results" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["step_split"]
rec = {"case": sys.argv[2], "round": int(sys.argv[3]), "side": "scaletrain", "steps": r["steps"],
       "global_batch": r["global_batch_size"], "steady_samples_per_s": r["global_batch_size"] / s["step_s"],
       "report_samples_per_s": r["throughput"]["samples_per_s"], "step_split": s,
       "phases_mean_s": {k: v["mean_s"] for k, v in r["phases"].items()}}
open(sys.argv[4], "a").write(json.dumps(rec) + "\n")
print(f"{rec['steady_samples_per_s']:.0f}")
PY
  rm -rf "$dir/checkpoints"  # 382 MB at ml-20m's size
}

# PyTorch: name data batch steps round
torch_run() {
  local out
  out=$("$PY" tools/torch_ncf_baseline.py --data "$OUT/$2" --threads 2 --batch-size "$3" --max-steps "$4")
  grep -m1 '^PyTorch BLAS' <<<"$out" >&2 || true  # which BLAS the baseline ran on (tools/torch_blas.py)
  "$PY" - "$1" "$5" "$3" "$4" "$results" "$out" <<'PY'
import json, re, sys
out = sys.argv[6]
steady = float(re.search(r"^steady ([0-9.]+)", out, re.M).group(1))
whole = float(re.search(r"^throughput ([0-9.]+)", out, re.M).group(1))
rec = {"case": sys.argv[1], "round": int(sys.argv[2]), "side": "pytorch", "steps": int(sys.argv[4]),
       "global_batch": int(sys.argv[3]), "steady_samples_per_s": steady, "report_samples_per_s": whole}
open(sys.argv[5], "a").write(json.dumps(rec) + "\n")
print(f"{steady:.0f}")
PY
}

# name data batch scaletrain_steps torch_steps
cases=("ml1m-b1024 ml1m 1024 120 60" "ml1m-b65536 ml1m 65536 10 6"
       "ml20m-b1024 ml20m 1024 60 25" "ml20m-b65536 ml20m 65536 10 5")
for r in $(seq "$rounds"); do
  for c in "${cases[@]}"; do
    read -r name data batch st_steps torch_steps <<<"$c"
    a=$(st_run "$name-1x2" "$data" 1 2 "$batch" "$st_steps" "$r")
    b=$(torch_run "$name" "$data" "$batch" "$torch_steps" "$r")
    d=$(st_run "$name-2x1" "$data" 2 1 "$batch" "$st_steps" "$r")
    echo "round $r $name: scaletrain 1x2 $a, pytorch 2 threads $b, scaletrain 2x1 $d samples/s (load $(cut -d' ' -f1 /proc/loadavg))"
  done
done

# Part 2: all-reduce bytes against compute, 2 ranks x 1 thread.
[ -f "$OUT/resnet50-data/val/manifest.json" ] ||
  "$BIN/scaletrain-data" synthetic --samples 64 --val-samples 8 --image-size 224,224,3 --classes 1000 \
    --output "$OUT/resnet50-data" --overwrite >/dev/null
ar_run() {  # name extra-args...
  local name=$1 dir=$OUT/runs/ar-$1
  shift
  rm -rf "$dir"
  mpirun --oversubscribe -np 2 "$BIN/scaletrain" train --threads 1 --eval-every 1000 --log-every 0 \
    --output-dir "$dir" "$@" >"$dir.log" 2>&1 || { echo "bench_ncf: $name failed, see $dir.log" >&2; exit 1; }
  "$PY" - "$dir/report.json" "$name" "$results" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rec = {"case": "allreduce-" + sys.argv[2], "side": "scaletrain", "parameters": r["parameters"],
       "allreduce_bytes_per_step": r["allreduce_bytes_per_step"], "global_batch": r["global_batch_size"],
       "steps": r["steps"], "step_split": r["step_split"],
       "allreduce_per_step_s": r["allreduce_time"]["per_step_s"]["mean"]}
open(sys.argv[3], "a").write(json.dumps(rec) + "\n")
PY
  rm -rf "$dir/checkpoints"
}
ar_run resnet50 --model resnet50 --data "$OUT/resnet50-data" --batch-size 4 --max-steps 6
ar_run ncf-b1024 --model ncf --data "$OUT/ml20m" --batch-size 1024 --max-steps 30
ar_run ncf-b65536 --model ncf --data "$OUT/ml20m" --batch-size 65536 --max-steps 6

"$PY" - "$results" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
med = statistics.median
print("\nPart 1: steady samples/s, median of rounds (each round's ratio first, then the median)")
print("| case | scaletrain 1x2 | PyTorch 2 threads | scaletrain 2x1 | ratio 1x2 / PyTorch | ratio 2x1 / PyTorch | rounds |")
print("|---|---|---|---|---|---|---|")
for case in dict.fromkeys(r["case"].rsplit("-", 1)[0] if r["side"] == "scaletrain" else r["case"]
                          for r in recs if not r["case"].startswith("allreduce")):
    def by_round(c, side):
        return {r["round"]: r for r in recs if r["case"] == c and r["side"] == side}
    a, b, d = by_round(case + "-1x2", "scaletrain"), by_round(case, "pytorch"), by_round(case + "-2x1", "scaletrain")
    rs = sorted(set(a) & set(b) & set(d))
    v = lambda m: [m[k]["steady_samples_per_s"] for k in rs]
    ra = [a[k]["steady_samples_per_s"] / b[k]["steady_samples_per_s"] for k in rs]
    rd = [d[k]["steady_samples_per_s"] / b[k]["steady_samples_per_s"] for k in rs]
    print(f"| {case} | {med(v(a)):.0f} ({', '.join(f'{x:.0f}' for x in v(a))}) | {med(v(b)):.0f} "
          f"({', '.join(f'{x:.0f}' for x in v(b))}) | {med(v(d)):.0f} ({', '.join(f'{x:.0f}' for x in v(d))}) "
          f"| {med(ra):.2f} | {med(rd):.2f} | {len(rs)} |")
    for side, m in (("scaletrain 1x2", a), ("scaletrain 2x1", d)):
        ph = {k: med([m[r]["phases_mean_s"][k] / m[r]["steps"] for r in rs]) * 1e3 for k in m[rs[0]]["phases_mean_s"]}
        print(f"|   {side} ms/step, whole run incl. first step: " +
              ", ".join(f"{k} {x:.1f}" for k, x in ph.items() if k != "evaluation") + " | | | | | | |")
print("\nPart 2: all-reduce against compute, 2 ranks x 1 thread")
print("| run | parameters | global batch | all-reduce MB/step | compute ms/step | all-reduce ms/step (here) | exposed ms/step (here) | MB per compute ms |")
print("|---|---|---|---|---|---|---|---|")
for r in recs:
    if r["case"].startswith("allreduce"):
        mb = r["allreduce_bytes_per_step"] / 1e6
        c = r["step_split"]["compute_s"] * 1e3
        print(f"| {r['case'][10:]} | {r['parameters']} | {r['global_batch']} | {mb:.1f} | {c:.1f} | "
              f"{r['allreduce_per_step_s'] * 1e3:.1f} | {r['step_split']['exposed_comm_s'] * 1e3:.1f} | {mb / c:.3f} |")
PY
