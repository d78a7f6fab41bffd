#!/usr/bin/env bash
# scaletrain-report on a small study of real runs, laid out as `scaletrain-study submit` lays them
# out (no Slurm needed): resnet20 strong (2 repeats, and a third never run) and weak (trained to a
# target; one repeat stopped by SIGUSR1 and not resumed), resnet50 strong. Checks the tables
# against numbers computed here from the report.json files, the listing of the missing and failed
# runs, the plots (PNG signature, SVG parses with an <svg> root), MLPerf scoring on known lists,
# the straggler flag on a report.json edited to make one rank slow, trace merging, the errors, and
# a study of two real transformer-tiny runs beside resnet20's: its rows, speedup and efficiency in
# tokens/s (report.json tokens_per_s), the other model's in samples/s.
source "$(dirname "$0")/lib.sh"
SRC=${ST_SOURCE:-.}
REPORT=("$PY" "$SRC/src/study/scaletrain_report.py")
T=$TMP_ROOT/scaling_report
S=$T/study
rm -rf "$T" && mkdir -p "$S"

$PY -c "import matplotlib" 2>/dev/null || fail "python3-matplotlib is missing (the report's plots need it): make deps"

"$BIN/scaletrain-data" synthetic --task image_classification --samples 512 --val-samples 64 --image-size 8,8,3 \
  --classes 4 --shards 2 --output "$T/data" >/dev/null
# ResNet-50 on 64x64 images: on 8x8 its last stages see 1x1 maps, so batch norm normalises over the
# 2 samples of a rank and the first step can blow up the weights (NaN, depending on rounding).
"$BIN/scaletrain-data" synthetic --task image_classification --samples 512 --val-samples 64 --image-size 64,64,3 \
  --classes 4 --shards 2 --output "$T/data64" >/dev/null
help=$("$BIN/scaletrain" train --help)
trace_opt=()
if grep -q -- "--trace" <<<"$help"; then trace_opt=(--trace); fi

# train MODEL MODE NODES REPEAT BATCH [train options...]: one run of the study (1 rank per node).
train() {
  local model=$1 mode=$2 nodes=$3 repeat=$4 batch=$5
  shift 5
  local dir=$S/$model/$mode-n$nodes-r$repeat log=$T/$model-$mode-n$nodes-r$repeat.log
  timeout 120 mpirun -np "$nodes" --oversubscribe "$BIN/scaletrain" train --model "$model" --data "${DATA:-$T/data}" \
    --output-dir "$dir" --batch-size "$batch" --threads 1 --log-every 0 "$@" >"$log" 2>&1 \
    || fail "run $model/$mode-n$nodes-r$repeat failed: $(tail -n 5 "$log")"
  rm -rf "$dir/checkpoints"  # not read by the report; resnet50's are large
}

echo "== real runs"
# Strong: global batch 32 (32 per rank on 1 node, 16 on 2); 16 steps per epoch, cut at 20.
for r in 1 2; do
  train resnet20 strong 1 "$r" 32 --epochs 2 --max-steps 20
  train resnet20 strong 2 "$r" 16 --epochs 2 --max-steps 20 "${trace_opt[@]}"
done
# Weak: 16 per rank, trained to 30% top-1 (reached after one epoch, or else run to the end of 2).
train resnet20 weak 1 1 16 --epochs 2 --target-accuracy 0.3
train resnet20 weak 2 1 16 --epochs 2 --target-accuracy 0.3
DATA=$T/data64 train resnet50 strong 1 1 4 --max-steps 2 --eval-every 0
DATA=$T/data64 train resnet50 strong 2 1 2 --max-steps 2 --eval-every 0
# A repeat stopped by SIGUSR1 (a preempted job not resubmitted): report.json says interrupted.
stopped=$S/resnet20/weak-n2-r2
mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/data" --output-dir "$stopped" \
  --batch-size 16 --threads 1 --epochs 50 --target-accuracy 0.3 --eval-every 50 --log-every 1 >"$T/stopped.log" 2>&1 &
job=$!
for i in $(seq 600); do grep -q "step 3/" "$T/stopped.log" && break; sleep 0.1; done
pid=$(rank_pid 0 || true)
[ -n "$pid" ] || fail "rank 0 of the run to stop is not running: $(tail -n 5 "$T/stopped.log")"
kill -USR1 "$pid"
rc=0
wait $job || rc=$?
[ "$rc" -eq 75 ] || fail "the stopped run exited $rc, expected 75: $(tail -n 5 "$T/stopped.log")"
# resnet20/strong-n2-r3 is in study.json but never ran.

# study.json as the study tool writes it (docs: contracts of scaletrain-study).
$PY - "$S" <<'PY'
import json, sys
S = sys.argv[1]
def run(model, mode, nodes, repeat, gb, bpr):
    rid = f"{model}/{mode}-n{nodes}-r{repeat}"
    return {"id": rid, "model": model, "mode": mode, "nodes": nodes, "ranks_per_node": 1, "ranks": nodes,
            "global_batch": gb, "batch_per_rank": bpr, "accumulate_steps": 1, "base_lr": 0.1, "repeat": repeat,
            "output_dir": f"{S}/{rid}", "job_id": None, "submissions": []}
runs = [run("resnet20", "strong", n, r, 32, 32 // n) for n in (1, 2) for r in (1, 2)]
runs += [run("resnet20", "strong", 2, 3, 32, 16)]
runs += [run("resnet20", "weak", 1, 1, 16, 16)] + [run("resnet20", "weak", 2, r, 32, 16) for r in (1, 2)]
runs += [run("resnet50", "strong", 1, 1, 4, 4), run("resnet50", "strong", 2, 1, 4, 2)]
study = {"format": 1, "name": "report-test", "study_file": None, "created_unix": 0,
         "parameters": {"models": ["resnet20", "resnet50"], "modes": ["strong", "weak"], "nodes": [1, 2],
                        "ranks_per_node": 1, "repeats": 2, "run_length": {"steps": 20}},
         "runs": runs, "report_job_id": None}
json.dump(study, open(S + "/study.json", "w"), indent=1)
PY

echo "== report"
"${REPORT[@]}" "$S" | tee "$T/report.log"
grep -q "10 runs: 8 used, 1 missing, 1 failed" "$T/report.log" || fail "the summary miscounts the runs"

# Everything below is computed from the runs' own files, independently of the report tool.
$PY - "$S" "$SRC" <<'PY'
import csv, json, os, statistics, sys
import xml.etree.ElementTree as ET
S, SRC = sys.argv[1], sys.argv[2]
study = json.load(open(S + "/study.json"))
out = S + "/report"
rows_csv = {(r["model"], r["mode"], int(r["nodes"])): r for r in csv.DictReader(open(out + "/scaling.csv"))}
rep = json.load(open(out + "/scaling.json"))
rows_json = {(r["model"], r["mode"], r["nodes"]): r for r in rep["rows"]}

def close(a, b, what):
    assert a is not None and b is not None and abs(a - b) <= 1e-9 * max(abs(a), abs(b)), (what, a, b)

def tpe(r):
    if r.get("time_per_epoch_s") is not None:
        return r["time_per_epoch_s"]
    return r["train_time_s"] / r["steps"] * r["steps_per_epoch"]

reports = {}
for run in study["runs"]:
    p = os.path.join(run["output_dir"], "report.json")
    if os.path.exists(p):
        r = json.load(open(p))
        r["run_dir"] = run["output_dir"]
        if r["status"] in ("completed", "target_reached", "max_steps"):
            reports.setdefault((run["model"], run["mode"], run["nodes"]), []).append(r)
assert sorted(reports) == sorted(rows_csv) == sorted(rows_json), (sorted(reports), sorted(rows_csv))

# Each row in both files: scaling.json, and scaling.csv read back as numbers.
def both(key, column):
    return [rows_json[key][column], float(rows_csv[key][column])]

mine = {}
for key, rs in reports.items():
    x = statistics.median(r["throughput"]["samples_per_s"] for r in rs)
    t = statistics.median(tpe(r) for r in rs)
    mine[key] = (x, t, rs[0]["world_size"])
    for value in both(key, "throughput_samples_per_s"):
        close(value, x, (key, "throughput"))
    for value in both(key, "time_per_epoch_s"):
        close(value, t, (key, "time per epoch"))
    assert both(key, "runs_used") == [len(rs)] * 2, (key, both(key, "runs_used"), len(rs))
    close(rows_json[key]["throughput_per_rank_samples_per_s"], x / rs[0]["world_size"], (key, "per rank"))
    close(rows_json[key]["throughput_min_samples_per_s"], min(r["throughput"]["samples_per_s"] for r in rs), key)
    close(rows_json[key]["time_per_epoch_max_s"], max(tpe(r) for r in rs), key)
    assert rows_json[key]["global_batch"] == rs[0]["global_batch_size"], key

for (model, mode, n), (x, t, ranks) in mine.items():
    bx, bt, branks = mine[(model, mode, 1)]
    speedup = bt / t if mode == "strong" else x / bx
    eff = speedup / (ranks / branks)
    for value in both((model, mode, n), "speedup"):
        close(value, speedup, (model, mode, n, "speedup"))
    for value in both((model, mode, n), "efficiency"):
        close(value, eff, (model, mode, n, "efficiency"))
    close(rep["comparison"][mode]["models"][model][str(n)]["speedup"], speedup, "side-by-side speedup")
print("tables match report.json: throughput, time per epoch, speedup, efficiency")

# Step split: report.json step_split, or the phases divided by the segment's steps.
for key, rs in reports.items():
    def compute(r):
        if r.get("step_split"):
            return r["step_split"]["compute_s"]
        ph, seg = r["phases"], r["segments"][-1]
        steps = seg["last_step"] - seg["first_step"]
        return sum(ph[p]["mean_s"] for p in ("forward", "backward", "optimizer")) / steps
    close(rows_json[key]["compute_s"], statistics.fmean(compute(r) for r in rs), (key, "compute"))
    # The gradient bytes all-reduced per step: the model's parameters, 4 bytes each.
    for value in both(key, "allreduce_mb_per_step"):
        close(value, statistics.fmean(4 * r["parameters"] / 1e6 for r in rs), (key, "all-reduce MB"))

# Models side by side: each model's all-reduce MB per step against its compute, at its 1-node run
# (the speedups' baseline), in scaling.json and in the Markdown's side-by-side section.
side = open(S + "/report/scaling.md").read().split("## Models side by side")[1].split("\n## ")[0]
for (model, mode, n), rs in reports.items():
    if n != 1:
        continue
    c = rep["comparison"][mode]["communication"][model]
    mb = statistics.fmean(4 * r["parameters"] / 1e6 for r in rs)
    compute_ms = rows_json[(model, mode, 1)]["compute_s"] * 1e3
    assert c["point"] == "n1" and c["nodes"] == 1, c
    close(c["allreduce_mb_per_step"], mb, (model, mode, "side-by-side MB"))
    close(c["compute_ms_per_step"], compute_ms, (model, mode, "side-by-side compute"))
    close(c["mb_per_compute_ms"], mb / compute_ms, (model, mode, "side-by-side MB per compute ms"))
    assert f"| {model} | 1 node | {rows_json[(model, mode, 1)]['batch_per_rank']} |" in side, (model, side)
assert set(rep["comparison"]["strong"]["communication"]) == {"resnet20", "resnet50"}, rep["comparison"]
assert side.count("| model | at | batch per rank | all-reduce MB/step | compute ms/step | MB per compute ms |") == 2, side
print("side by side: all-reduce MB/step and MB per compute ms of each model")

# Time to target of the weak series: fewer runs than MLPerf's 5, so a flagged plain mean.
for n in (1, 2):
    row = rows_json[("resnet20", "weak", n)]
    times = []
    for r in reports[("resnet20", "weak", n)]:
        if r["time_to_target_s"] is None:
            continue
        log = os.path.join(r["run_dir"], "mllog.txt")
        if os.path.exists(log):
            ev = [json.loads(l[len(":::MLLOG "):]) for l in open(log) if l.startswith(":::MLLOG ")]
            start = [e["time_ms"] for e in ev if e["key"] == "run_start"][0]
            stop = [e["time_ms"] for e in ev if e["key"] == "run_stop"][-1]
            times.append((stop - start) / 1000)
        else:
            times.append(r["time_to_target_s"])
    ttt = row["time_to_target"]
    if times:
        close(ttt["value_s"], statistics.fmean(times), ("time to target", n))
        assert ttt["method"] == "mean" and not ttt["mlperf_valid"] and "fewer than the 5" in ttt["note"], ttt
    else:
        assert ttt["value_s"] is None, ttt
assert rows_json[("resnet20", "strong", 1)]["time_to_target"] is None  # no target in that series

# Missing and failed runs are listed, with reasons, in the JSON and the Markdown.
bad = {b["id"]: b for b in rep["missing_failed"]}
assert set(bad) == {"resnet20/strong-n2-r3", "resnet20/weak-n2-r2"}, bad
assert bad["resnet20/strong-n2-r3"]["state"] == "missing", bad
stopped = bad["resnet20/weak-n2-r2"]
assert stopped["state"] == "failed" and "interrupted" in stopped["reasons"][0], stopped
strong2 = rows_json[("resnet20", "strong", 2)]
assert strong2["runs_planned"] == 3 and strong2["runs_missing"] == 1 and strong2["runs_used"] == 2, strong2
md = open(out + "/scaling.md").read()
section = md.split("## Missing and failed runs")[1].split("\n## ")[0]
for rid in bad:
    assert rid in section, (rid, section)
for heading in ("## resnet20", "## resnet50", "## Models side by side", "## Time to target", "## Step time split",
                "## Stragglers", "## Plots"):
    assert heading in md, heading

# Plots: every one as PNG and SVG.
names = ["throughput", "speedup", "efficiency", "time_per_epoch", "step_split-resnet20", "step_split-resnet50"]
for name in names:
    with open(f"{out}/plots/{name}.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", name
    root = ET.parse(f"{out}/plots/{name}.svg").getroot()
    assert root.tag.endswith("}svg") or root.tag == "svg", (name, root.tag)
    assert f"plots/{name}.png" in md, name
print("missing and failed runs listed; plots valid")

# MLPerf scoring on known lists (training_rules.adoc: 5 runs, drop fastest and slowest, mean of the rest).
sys.path.insert(0, SRC + "/src/study")
from report_scoring import mlperf_score
s = mlperf_score([10.0, 12.0, 11.0, 50.0, 9.0])
assert s["method"] == "mlperf" and s["mlperf_valid"] and abs(s["value_s"] - 11.0) < 1e-12, s
s = mlperf_score([10.0, 12.0, 11.0, 9.0], not_converged=1)  # the non-converged run is the dropped slowest
assert s["mlperf_valid"] and abs(s["value_s"] - 11.0) < 1e-12, s
s = mlperf_score([10.0, 12.0, 11.0], not_converged=2)
assert not s["mlperf_valid"] and "invalid" in s["note"], s
s = mlperf_score([10.0, 14.0, 9.0])
assert s["method"] == "mean" and abs(s["value_s"] - 11.0) < 1e-12 and "fewer than the 5" in s["note"], s
s = mlperf_score([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])  # more repeats than the rule: still drop one each end
assert s["mlperf_valid"] and abs(s["value_s"] - 4.0) < 1e-12, s
assert mlperf_score([], not_converged=5)["value_s"] is None
print("MLPerf scoring ok")
# Against a base of 2 nodes of 4 ranks: efficiency divides by the growth in ranks, not by N.
from report_scoring import speedup_efficiency
base = {"mode": "strong", "ranks": 8, "time_per_epoch_s": 12.0, "throughput_samples_per_s": 100.0}
sp, ef = speedup_efficiency({"mode": "strong", "ranks": 32, "time_per_epoch_s": 4.0}, base)
assert abs(sp - 3.0) < 1e-12 and abs(ef - 0.75) < 1e-12, (sp, ef)
sp, ef = speedup_efficiency({"mode": "weak", "ranks": 16, "throughput_samples_per_s": 180.0}, dict(base, mode="weak"))
assert abs(sp - 1.8) < 1e-12 and abs(ef - 0.9) < 1e-12, (sp, ef)
PY

echo "== stragglers: one rank made slow in a copy of a real report.json; an older report.json"
L=$T/slow
mkdir -p "$L/resnet20"
cp -r "$S/resnet20/strong-n2-r1" "$L/resnet20/strong-n2-r1"
cp -r "$S/resnet20/strong-n1-r1" "$L/resnet20/strong-n1-r1"
$PY - "$S" "$L" <<'PY'
import json, sys
S, L = sys.argv[1:]
study = json.load(open(S + "/study.json"))
study["runs"] = [r for r in study["runs"] if r["id"] in ("resnet20/strong-n1-r1", "resnet20/strong-n2-r1")]
for run in study["runs"]:
    run["output_dir"] = "/nonexistent/moved"  # a study copied elsewhere: found under STUDY_DIR/<id>
json.dump(study, open(L + "/study.json", "w"))
# The 1-node run as a report.json written before time_per_epoch_s, step_split and step_time existed.
p = L + "/resnet20/strong-n1-r1/report.json"
r = json.load(open(p))
for k in ("time_per_epoch_s", "step_split", "step_time"):
    r.pop(k, None)
json.dump(r, open(p, "w"))
p = L + "/resnet20/strong-n2-r1/report.json"
r = json.load(open(p))
per_rank = (r.get("step_time") or {}).get("per_rank") or [
    {"rank": k, "host": r["hosts"][k], "steps": r["steps"], "mean_s": 0.01, "p95_s": 0.012, "max_s": 0.02}
    for k in range(r["world_size"])]
base = 0.010
for e in per_rank:
    e["p50_s"] = base
per_rank[1]["p50_s"] = base * 1.5
per_rank[1]["host"] = "slow-node"
r["step_time"] = {"per_rank": per_rank, "median_p50_s": base * 1.25}
json.dump(r, open(p, "w"))
# Hand-written per-rank traces in the documented format (merged below and by the report).
import os
os.makedirs(L + "/resnet20/strong-n2-r1/trace", exist_ok=True)
for rank in (0, 1):
    ev = [{"ph": "X", "name": n, "cat": "step", "pid": rank, "tid": tid, "ts": 1.7e15 + 1000 * i, "dur": 500}
          for i, (n, tid) in enumerate([("forward", 0), ("backward", 0), ("allreduce bucket 0", 1), ("data", 2)])]
    meta = {"rank": rank, "host": ["vm", "slow-node"][rank]}
    json.dump({"traceEvents": ev, "displayTimeUnit": "ms", "metadata": meta},
              open(f"{L}/resnet20/strong-n2-r1/trace/rank-{rank:05d}.json", "w"))
PY
"${REPORT[@]}" "$L" --straggler-margin 0.10 >"$T/slow.log"
"${REPORT[@]}" trace "$L/resnet20/strong-n2-r1"
$PY - "$L" <<'PY'
import json, sys
L = sys.argv[1]
s = json.load(open(L + "/report/scaling.json"))["stragglers"]
assert [x["rank"] for x in s["runs"][0]["slow_ranks"]] == [1], s
assert [h["host"] for h in s["hosts"]] == ["slow-node"] and s["hosts"][0]["runs_flagged"] == 1, s
assert abs(s["runs"][0]["median_p50_s"] - 0.0125) < 1e-12, s
md = open(L + "/report/scaling.md").read().split("## Stragglers")[1]
assert "slow-node" in md and "| resnet20/strong-n2-r1 | 1 |" in md, md
for merged in (L + "/resnet20/strong-n2-r1/trace.json", L + "/report/trace-resnet20-strong-n2-r1.json"):
    t = json.load(open(merged))
    names = {e["pid"]: e["args"]["name"] for e in t["traceEvents"] if e.get("name") == "process_name"}
    assert names == {0: "rank 0 (vm)", 1: "rank 1 (slow-node)"}, names
    assert sum(e["ph"] == "X" for e in t["traceEvents"]) == 8, merged
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in t["traceEvents"] if e.get("name") == "thread_name"}
    assert threads[(1, 1)] == "communication" and threads[(0, 2)] == "data 0", threads
print("straggler rank 1 and host slow-node flagged; traces merged")
rep = json.load(open(L + "/report/scaling.json"))
old = json.load(open(L + "/resnet20/strong-n1-r1/report.json"))
row = [x for x in rep["rows"] if x["nodes"] == 1][0]
tpe = old["train_time_s"] * old["steps_per_epoch"] / old["steps"]
seg = old["segments"][-1]
steps = seg["last_step"] - seg["first_step"]
compute = sum(old["phases"][p]["mean_s"] for p in ("forward", "backward", "optimizer")) / steps
assert abs(row["time_per_epoch_s"] - tpe) <= 1e-12 * tpe and "train_time_s" in row["time_per_epoch_source"], row
assert abs(row["compute_s"] - compute) <= 1e-12 * compute and "phases" in row["step_split_source"], row
assert s["runs_without_step_time"] == ["resnet20/strong-n1-r1"], s
assert "not recorded (report.json has no step_time) in: resnet20/strong-n1-r1" in md, md
print("older report.json: time per epoch and step split derived; per-rank step times not recorded")
PY
"${REPORT[@]}" "$L" --straggler-margin 0.6 >/dev/null
$PY -c "import json, sys; s = json.load(open(sys.argv[1]))['stragglers']; assert not s['runs'], s" \
  "$L/report/scaling.json" || fail "a 50% slower rank was flagged with a 60% margin"

if [ ${#trace_opt[@]} -gt 0 ]; then
  echo "== real traces (scaletrain train --trace)"
  $PY - "$S" <<'PY'
import json, sys
t = json.load(open(sys.argv[1] + "/report/trace-resnet20-strong-n2-r1.json"))
pids = {e["pid"] for e in t["traceEvents"] if e["ph"] == "X"}
names = [e["args"]["name"] for e in t["traceEvents"] if e.get("name") == "process_name"]
assert pids == {0, 1} and len(names) == 2, (pids, names)
print("real traces merged:", names)
PY
fi

echo "== translation: tokens/s beside the image runs' samples/s"
# Two real runs of transformer-tiny, a weak series of 256 tokens per rank on 1 and 2 ranks, in a
# study with the resnet20 weak series above (copied): each model's table, speedup and efficiency
# in its own unit, the token columns of scaling.csv, and the image-only study's CSV without them.
X=$T/translation
mkdir -p "$X/resnet20"
cp -r "$S/resnet20/weak-n1-r1" "$S/resnet20/weak-n2-r1" "$X/resnet20/"
"$BIN/scaletrain-data" synthetic --task translation --kind copy --sentences 400 --words 20 --max-length 8 \
  --output "$T/copy" >/dev/null
for n in 1 2; do
  timeout 120 mpirun -np "$n" --oversubscribe "$BIN/scaletrain" train --model transformer-tiny --data "$T/copy" \
    --output-dir "$X/transformer-tiny/weak-n$n-r1" --epochs 1 --batch-tokens 256 --warmup-steps 10 --eval-every 0 \
    --threads 1 --log-every 0 >"$T/translation-n$n.log" 2>&1 || fail "transformer-tiny on $n rank(s): $(tail -n 5 "$T/translation-n$n.log")"
done
$PY - "$S" "$X" <<'PY'
import json, sys
S, X = sys.argv[1:]
study = json.load(open(S + "/study.json"))
runs = [dict(r, output_dir=f"{X}/{r['id']}") for r in study["runs"] if r["model"] == "resnet20" and
        r["mode"] == "weak" and r["repeat"] == 1]
# As scaletrain-study writes a translation model's runs: batches in tokens (--batch-tokens per rank).
for n in (1, 2):
    rid = f"transformer-tiny/weak-n{n}-r1"
    runs.append({"id": rid, "model": "transformer-tiny", "mode": "weak", "nodes": n, "ranks_per_node": 1, "ranks": n,
                 "global_batch": 256 * n, "batch_per_rank": 256, "accumulate_steps": 1, "batch_unit": "tokens",
                 "base_lr": None, "repeat": 1, "output_dir": f"{X}/{rid}", "job_id": None, "submissions": []})
study.update(name="translation", runs=runs)
json.dump(study, open(X + "/study.json", "w"), indent=1)
PY
"${REPORT[@]}" "$X" >"$T/translation-report.log" || fail "the translation report failed: $(cat "$T/translation-report.log")"
$PY - "$S" "$X" <<'PY'
import csv, json, sys
S, X = sys.argv[1:]
def close(a, b, what):
    assert a is not None and b is not None and abs(float(a) - float(b)) <= 1e-9 * max(abs(float(a)), abs(float(b))), \
        (what, a, b)
rows = {(r["model"], int(r["nodes"])): r for r in csv.DictReader(open(X + "/report/scaling.csv"))}
reports = {(m, n): json.load(open(f"{X}/{m}/weak-n{n}-r1/report.json")) for m in ("transformer-tiny", "resnet20")
           for n in (1, 2)}
tokens = {n: reports[("transformer-tiny", n)]["throughput"] for n in (1, 2)}
for n in (1, 2):
    t, row = tokens[n], rows[("transformer-tiny", n)]
    assert t["unit"] == "tokens" and row["unit"] == "tokens", (t, row["unit"])
    for column in ("throughput_tokens_per_s", "throughput_min_tokens_per_s", "throughput_max_tokens_per_s"):
        close(row[column], t["tokens_per_s"], (n, column))
    close(row["throughput_per_rank_tokens_per_s"], t["tokens_per_s"] / n, (n, "tokens per rank"))
    close(row["throughput_samples_per_s"], t["samples_per_s"], (n, "sentence pairs per s"))
    assert int(row["global_batch"]) == reports[("transformer-tiny", n)]["global_batch_size"] == 256 * n, row
    image = rows[("resnet20", n)]
    assert image["unit"] == "samples" and image["throughput_tokens_per_s"] == "", image
    close(image["throughput_samples_per_s"], reports[("resnet20", n)]["throughput"]["samples_per_s"], (n, "images"))
# Weak speedup and efficiency on tokens/s for translation, on samples/s for the images.
speedup = tokens[2]["tokens_per_s"] / tokens[1]["tokens_per_s"]
close(rows[("transformer-tiny", 2)]["speedup"], speedup, "translation speedup")
close(rows[("transformer-tiny", 2)]["efficiency"], speedup / 2, "translation efficiency")
assert abs(speedup - tokens[2]["samples_per_s"] / tokens[1]["samples_per_s"]) > 1e-9 * speedup, "not told apart"
image = [reports[("resnet20", n)]["throughput"]["samples_per_s"] for n in (1, 2)]
close(rows[("resnet20", 2)]["speedup"], image[1] / image[0], "image speedup")
comparison = json.load(open(X + "/report/scaling.json"))["comparison"]["weak"]
close(comparison["models"]["transformer-tiny"]["2"]["speedup"], speedup, "side by side")
md = open(X + "/report/scaling.md").read()
translation = md.split("## transformer-tiny\n")[1].split("\n## ")[0]
images = md.split("## resnet20\n")[1].split("\n## ")[0]
assert "| global batch (tokens) | batch/rank (tokens) | runs used | tokens/s (median) | tokens/s min–max | " \
       "tokens/s per rank |" in translation and "samples/s" not in translation, translation
assert "| samples/s (median) |" in images and "tokens" not in images, images
for n in (1, 2):
    x = tokens[n]["tokens_per_s"]
    cell = f"{x:.0f}" if x >= 1e4 else f"{x:.4g}"
    assert f"| {n} | {n} | {256 * n} | 256 | 1/1 | {cell} |" in translation, (cell, translation)
assert "| transformer-tiny | 1 node | 256 tokens |" in md, md
# A study without translation runs keeps its CSV columns as they were.
header = open(S + "/report/scaling.csv").readline().strip().split(",")
assert "unit" not in header and header[-1] == "point", header[-3:]
print(f"ok: translation rows in tokens/s ({tokens[1]['tokens_per_s']:.0f} and {tokens[2]['tokens_per_s']:.0f}), "
      f"weak speedup {speedup:.3f} on tokens/s; resnet20 beside it in samples/s")
PY

echo "== errors"
expect_failure "no study dir" "$T/nowhere" "${REPORT[@]}" "$T/nowhere"
mkdir -p "$T/empty"
expect_failure "no study.json" "scaletrain-study submit" "${REPORT[@]}" "$T/empty"
mkdir -p "$T/badjson" && echo '{"format": 1, "runs": [' >"$T/badjson/study.json"
expect_failure "bad study.json" "$T/badjson/study.json" "${REPORT[@]}" "$T/badjson"
expect_failure "bad margin" "--straggler-margin" "${REPORT[@]}" "$S" --straggler-margin -1
expect_failure "no traces" "--trace" "${REPORT[@]}" trace "$S/resnet20/weak-n1-r1"
rc=0; "${REPORT[@]}" "$T/nowhere" 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "a missing STUDY_DIR exited $rc, expected 2"
rc=0; "${REPORT[@]}" "$T/empty" 2>/dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "a STUDY_DIR without study.json exited $rc, expected 1"
echo "scaling report passed"
