#!/usr/bin/env bash
# scaletrain-report --prediction: a synthetic study (report.json files with known numbers, laid out
# as `scaletrain-study submit` lays them out; no training) beside predictions written here in the
# format of `scaletrain-advisor predict --json`, and one written by scaletrain-advisor itself.
# Checks the predicted columns and errors of scaling.csv/json against values computed here, the
# "Prediction against measurement" section and its 15% flag, the per-rank batch mismatch, the
# predicted curves (nodes, rebased speedup, epoch of the study's dataset), the dashed "predicted"
# lines in the SVGs, a model's strong and weak series from two advisor runs, and the errors: a
# model the study lacks, a file that is not advice, a point without a step time.
source "$(dirname "$0")/lib.sh"
SRC=${ST_SOURCE:-.}
REPORT=("$PY" "$SRC/src/study/scaletrain_report.py")
T=$TMP_ROOT/scaling_report_prediction
S=$T/study
rm -rf "$T" && mkdir -p "$S"

$PY -c "import matplotlib" 2>/dev/null || fail "python3-matplotlib is missing (the report's plots need it): make deps"

# The study, its runs and two predictions. resnet50: 8 ranks per node, strong (global batch 1024,
# 1 node accumulates 2 x 64) and weak (64 per rank) on 1, 2, 4 nodes. resnet20: strong (global 256)
# on 1, 2 nodes; its prediction is for a global batch of 512, so nothing of it compares.
$PY - "$S" "$T" <<'PY'
import json, os, sys
S, T = sys.argv[1:]
measured_step = {("resnet50", "strong", 1): 0.200, ("resnet50", "strong", 2): 0.110, ("resnet50", "strong", 4): 0.065,
                 ("resnet50", "weak", 1): 0.100, ("resnet50", "weak", 2): 0.104, ("resnet50", "weak", 4): 0.110,
                 ("resnet20", "strong", 1): 0.050, ("resnet20", "strong", 2): 0.030}
runs = []
for (model, mode, nodes), step in measured_step.items():
    ranks = nodes * 8
    gb = {"resnet50": 1024, "resnet20": 256}[model] if mode == "strong" else 64 * ranks
    acc = 2 if (model, mode, nodes) == ("resnet50", "strong", 1) else 1
    rid = f"{model}/{mode}-n{nodes}-r1"
    runs.append({"id": rid, "model": model, "mode": mode, "nodes": nodes, "ranks_per_node": 8, "ranks": ranks,
                 "global_batch": gb, "batch_per_rank": gb // ranks // acc, "accumulate_steps": acc, "base_lr": 0.1,
                 "repeat": 1, "output_dir": f"{S}/{rid}", "job_id": None, "submissions": []})
    os.makedirs(f"{S}/{rid}")
    # Throughput a little below global batch / step (the warm-up step), so its error differs from the step's.
    per_epoch = {"resnet50": 102400, "resnet20": 25600}[model] // gb
    report = {"status": "max_steps", "model": model, "world_size": ranks, "global_batch_size": gb,
              "accumulate_steps": acc, "steps": 10, "steps_per_epoch": per_epoch,
              "throughput": {"samples_per_s": 0.98 * gb / step}, "time_per_epoch_s": per_epoch * step / 0.98,
              "step_split": {"step_s": step, "compute_s": 0.8 * step, "exposed_comm_s": 0.1 * step,
                             "data_wait_s": 0.0}}
    json.dump(report, open(f"{S}/{rid}/report.json", "w"))
models = [{"name": "resnet50", "train_samples": 102400}, {"name": "resnet20"}]
json.dump({"format": 1, "name": "prediction-test", "study_file": None, "created_unix": 0,
           "parameters": {"models": models, "modes": ["strong", "weak"], "nodes": [1, 2, 4], "ranks_per_node": 8},
           "runs": runs, "report_job_id": None}, open(S + "/study.json", "w"), indent=1)

def point(gpus, per_rank, step):
    nodes, rpn = (1, gpus) if gpus < 8 else (gpus // 8, 8)
    return {"gpus": gpus, "nodes": nodes, "ranks_per_node": rpn, "per_rank_batch": per_rank,
            "global_batch": per_rank * gpus, "algorithm": "ring", "forward_s": step / 3, "backward_s": step / 2,
            "optimizer_s": step / 6, "compute_s": step, "comm_s": 0.0, "exposed_comm_s": 0.0, "data_wait_s": 0.0,
            "step_s": step, "samples_per_s": per_rank * gpus / step, "epoch_s": 1281167 * step / (per_rank * gpus),
            "speedup": 1.0, "efficiency": 1.0}

def advice(model, strong_global, strong_steps, weak_steps):
    return {"format": "scaletrain-advice", "version": 1,
            "calibration": {"file": f"{model}.json", "model": model, "device": "V100 (test)", "precision": "mixed",
                            "source": "written by the test"},
            "machine": {"name": "DGX-1 (test)", "gpus_per_node": 8, "max_nodes": 80}, "batch_per_gpu": 64,
            "efficiency_threshold": 0.7,
            "series": {"strong": [point(g, strong_global / g, s) for g, s in strong_steps.items()],
                       "weak": [point(g, 64, s) for g, s in weak_steps.items()]},
            "largest_efficient": {}, "sharing": {}}

# Predicted steps: strong at 8, 16, 32 GPUs -5%, -9.1%, -23.1% (flagged); weak within 15%.
strong = {1: 1.2, 2: 0.65, 4: 0.36, 8: 0.190, 16: 0.100, 32: 0.050}
# 12 GPUs is 1.5 of the study's 8-rank nodes: no place on its node axis.
weak = {1: 0.090, 2: 0.091, 4: 0.092, 8: 0.095, 12: 0.097, 16: 0.098, 32: 0.100}
json.dump(advice("resnet50", 1024, strong, weak), open(T + "/resnet50.advice.json", "w"))
json.dump(advice("resnet20", 512, {1: 0.4, 8: 0.06, 16: 0.04}, {8: 0.05}), open(T + "/resnet20.advice.json", "w"))
json.dump(advice("vgg16", 1024, strong, weak), open(T + "/vgg16.advice.json", "w"))
PY

echo "== report with two predictions"
"${REPORT[@]}" "$S" --prediction "$T/resnet50.advice.json" --prediction "$T/resnet20.advice.json" | tee "$T/report.log"
grep -q "prediction: 6 point(s) compared, 1 with an error above 15%" "$T/report.log" \
  || fail "the summary miscounts the compared points"

$PY - "$S" "$T" <<'PY'
import csv, json, sys
import xml.etree.ElementTree as ET
S, T = sys.argv[1:]
out = S + "/report"
rep = json.load(open(out + "/scaling.json"))
rows_json = {(r["model"], r["mode"], r["nodes"]): r for r in rep["rows"]}
rows_csv = {(r["model"], r["mode"], int(r["nodes"])): r for r in csv.DictReader(open(out + "/scaling.csv"))}
md = open(out + "/scaling.md").read()

def close(a, b, what):
    assert a is not None and b is not None and abs(a - b) <= 1e-9 * max(abs(a), abs(b)), (what, a, b)

# Independently: the numbers the study and the prediction were written with.
measured_step = {("strong", 1): 0.200, ("strong", 2): 0.110, ("strong", 4): 0.065,
                 ("weak", 1): 0.100, ("weak", 2): 0.104, ("weak", 4): 0.110}
predicted_step = {("strong", 8): 0.190, ("strong", 16): 0.100, ("strong", 32): 0.050,
                  ("weak", 8): 0.095, ("weak", 16): 0.098, ("weak", 32): 0.100}
for (mode, nodes), step in measured_step.items():
    gpus = 8 * nodes
    gb = 1024 if mode == "strong" else 64 * gpus
    pstep = predicted_step[(mode, gpus)]
    x, px = 0.98 * gb / step, gb / pstep
    expect = {"predicted_step_s": pstep, "predicted_throughput_samples_per_s": px,
              "step_error_pct": (pstep - step) / step * 100, "throughput_error_pct": (px - x) / x * 100}
    for column, value in expect.items():
        close(rows_json[("resnet50", mode, nodes)][column], value, (mode, nodes, column, "json"))
        close(float(rows_csv[("resnet50", mode, nodes)][column]), value, (mode, nodes, column, "csv"))
close(rows_json[("resnet50", "strong", 4)]["step_error_pct"], -300 / 13, "a known value: -23.08%")
assert "accumulated micro-batches of 64" in rows_json[("resnet50", "strong", 1)]["prediction_note"], rows_json
assert rows_json[("resnet50", "weak", 2)]["prediction_note"] is None, rows_json[("resnet50", "weak", 2)]
assert all(r["prediction_file"] == T + "/resnet50.advice.json" for k, r in rows_csv.items() if k[0] == "resnet50")
print("predicted columns and errors match the numbers written")

# resnet20: another global batch in the prediction: said, not compared.
for n in (1, 2):
    row, line = rows_json[("resnet20", "strong", n)], rows_csv[("resnet20", "strong", n)]
    assert "per-rank batch differs" in row["prediction_note"] and "not compared" in row["prediction_note"], row
    assert row["step_error_pct"] is None and row["predicted_step_s"] is None, row
    assert line["step_error_pct"] == "" and "per-rank batch differs" in line["prediction_note"], line
close(float(rows_csv[("resnet20", "strong", 2)]["prediction_note"].split("predicted ")[1].split()[0]), 32.0,
      "the predicted share at 16 GPUs: 512 / 16")

# The Markdown section: every point, the flag above 15% on strong 4 nodes only.
section = md.split("## Prediction against measurement")[1].split("\n## ")[0]
lines = {tuple(c.strip() for c in l.strip("|").split("|")[:3]): l for l in section.splitlines()
         if l.startswith("| resnet")}
assert len(lines) == 8, lines
flagged = [k for k, l in lines.items() if "above 15%" in l]
assert flagged == [("resnet50", "strong", "4")], flagged
assert "-23.1%" in lines[("resnet50", "strong", "4")], lines
assert "-5.0%" in lines[("resnet50", "strong", "1")], lines
assert "per-rank batch differs" in lines[("resnet20", "strong", "2")], lines
assert "6 of 8 points compared, 1 above 15%" in section, section
assert "resnet50.advice.json" in section and "V100 (test)" in section, section

# The curves: x in the study's nodes (1, 2, 4 GPUs are inside one node, 12 is not whole nodes:
# left out), speedup and efficiency against the series' baseline (8 GPUs), an epoch of the
# study's 102400 samples.
pred = {p["model"]: p for p in rep["predictions"]}
assert set(pred) == {"resnet50", "resnet20"} and pred["resnet20"]["curves"] == {}, pred
for mode in ("strong", "weak"):
    curve = pred["resnet50"]["curves"][mode]
    assert [p["nodes"] for p in curve] == [1, 2, 4] and [p["gpus"] for p in curve] == [8, 16, 32], curve
    for p in curve:
        gb = 1024 if mode == "strong" else 64 * p["gpus"]
        step, base = predicted_step[(mode, p["gpus"])], predicted_step[(mode, 8)]
        base_x = (1024 if mode == "strong" else 512) / base
        close(p["speedup"], gb / step / base_x, (mode, p, "speedup"))
        close(p["efficiency"], gb / step / base_x / (p["gpus"] / 8), (mode, p, "efficiency"))
        close(p["time_per_epoch_s"], (102400 // gb) * step, (mode, p, "epoch"))
assert any(w.startswith("resnet20 strong: no prediction at the study's global batch (256) in ") for w in
           rep["warnings"]), rep["warnings"]
assert any("training samples of resnet20" in w for w in rep["warnings"]) is False, rep["warnings"]

# The plots: a dashed "predicted" line per (model, mode) on each of the four line plots.
plots = {p["png"].split("/")[-1][:-4]: p for p in rep["plots"]}
for name in ("throughput", "speedup", "efficiency", "time_per_epoch"):
    assert plots[name]["predicted"] == ["resnet50 strong", "resnet50 weak"], (name, plots[name])
    svg = open(f"{out}/plots/{name}.svg").read()
    root = ET.fromstring(svg)
    ids = {e.get("id") for e in root.iter()}
    assert {"predicted-resnet50-strong", "predicted-resnet50-weak"} <= ids, (name, sorted(i for i in ids if i))
    assert "predicted-resnet20-strong" not in ids, name
    assert "<!-- resnet50 predicted -->" in svg, name  # the legend's text
    group = next(e for e in root.iter() if e.get("id") == "predicted-resnet50-strong")
    dashes = [e.get("style", "") for e in group.iter() if e.tag.endswith("path")]
    assert any("stroke-dasharray" in s for s in dashes), (name, dashes)
assert plots["step_split-resnet50"]["predicted"] == [], plots
print("section, flag, curves and dashed predicted lines ok")
PY

echo "== a study of 1 rank per node against a prediction that fills nodes: compared, the layout said"
$PY - "$SRC" <<'PY'
import sys
sys.path.insert(0, sys.argv[1] + "/src/study")
from report_prediction import compare_rows
row = {"model": "m", "mode": "weak", "nodes": 2, "ranks": 2, "ranks_per_node": 1, "global_batch": 64,
       "batch_per_rank": 32, "accumulate_steps": 1, "runs_used": 1, "step_s": 0.5,
       "throughput_samples_per_s": 100.0}
point = {"gpus": 2, "nodes": 1, "ranks_per_node": 2, "per_rank_batch": 32.0, "global_batch": 64.0, "step_s": 0.4,
         "samples_per_s": 160.0, "epoch_s": 1.0}
compare_rows([row], [{"model": "m", "file": "m.json", "series": {"weak": [point]}}])
assert abs(row["step_error_pct"] + 20.0) < 1e-12 and abs(row["throughput_error_pct"] - 60.0) < 1e-12, row
assert row["prediction_note"] == "layout differs: measured 2 node(s) x 1 ranks, predicted 1 x 2", row
PY

echo "== without a prediction: the columns are there, empty; the section says how to add one"
"${REPORT[@]}" "$S" --output "$T/plain" >/dev/null
$PY - "$T/plain" <<'PY'
import csv, json, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(out + "/scaling.csv")))
assert rows and all(r["step_error_pct"] == "" and r["prediction_note"] == "" for r in rows), rows
rep = json.load(open(out + "/scaling.json"))
assert rep["predictions"] == [] and all(p["predicted"] == [] for p in rep["plots"]), rep["plots"]
assert "No prediction given (`--prediction FILE`" in open(out + "/scaling.md").read()
assert "predicted" not in open(out + "/plots/throughput.svg").read()
PY

echo "== a prediction written by scaletrain-advisor"
[ -x "$BIN/scaletrain-advisor" ] || fail "$BIN/scaletrain-advisor is not built"
cat >"$T/cal.json" <<'EOF'
{"format": "scaletrain-calibration", "version": 1, "model": "resnet50", "device": "V100 test",
 "precision": "mixed", "source": "t",
 "points": [{"batch": 208, "forward_s": 0.047, "backward_s": 0.094, "optimizer_s": 0.002}],
 "forward": {"fixed_s": 0.0015, "per_sample_s": 0.00022}, "backward": {"fixed_s": 0.003, "per_sample_s": 0.00044},
 "optimizer_s": 0.002, "gradient_bytes": 51200000, "bucket_mb": 25,
 "buckets": [{"bytes": 25600000, "ready_fraction": 0.6}, {"bytes": 25600000, "ready_fraction": 1.0}],
 "input_samples_per_s": 0, "default_batch": 208, "train_samples": 1281167}
EOF
# One run of predict has one batch: the weak series' 64 per rank here, and the strong series'
# global 1024 as 128 per GPU from 8 GPUs in a second file.
"$BIN/scaletrain-advisor" predict --calibration "$T/cal.json" --batch 64 --max-nodes 4 \
  --json "$T/advisor.json" >/dev/null
"$BIN/scaletrain-advisor" predict --calibration "$T/cal.json" --scaling strong --batch 128 --gpus 8,16,32 \
  --json "$T/advisor-strong.json" >/dev/null
"${REPORT[@]}" "$S" --prediction "$T/advisor.json" --output "$T/advisor" >/dev/null
"${REPORT[@]}" "$S" --prediction "$T/advisor.json" --prediction "$T/advisor-strong.json" --output "$T/advisor2" \
  >/dev/null
$PY - "$T" <<'PY'
import json, sys
T = sys.argv[1]
advice = json.load(open(T + "/advisor.json"))
rows = {(r["model"], r["mode"], r["nodes"]): r for r in json.load(open(T + "/advisor/scaling.json"))["rows"]}
weak = {p["gpus"]: p for p in advice["series"]["weak"]}
for n, step in ((1, 0.100), (2, 0.104), (4, 0.110)):
    row = rows[("resnet50", "weak", n)]
    expect = (weak[8 * n]["step_s"] - step) / step * 100
    assert abs(row["step_error_pct"] - expect) <= 1e-9 * abs(expect), (n, row["step_error_pct"], expect)
# Its strong series is 64 samples at 1 GPU: not the study's 1024.
assert all("per-rank batch differs" in rows[("resnet50", "strong", n)]["prediction_note"] for n in (1, 2, 4))
assert rows[("resnet20", "strong", 1)]["prediction_note"] is None
# With the strong file as well: both series compared, each from its own file, both drawn.
rep2 = json.load(open(T + "/advisor2/scaling.json"))
rows = {(r["model"], r["mode"], r["nodes"]): r for r in rep2["rows"]}
strong = {p["gpus"]: p for p in json.load(open(T + "/advisor-strong.json"))["series"]["strong"]}
for n, step in ((1, 0.200), (2, 0.110), (4, 0.065)):
    row = rows[("resnet50", "strong", n)]
    expect = (strong[8 * n]["step_s"] - step) / step * 100
    assert abs(row["step_error_pct"] - expect) <= 1e-9 * abs(expect), (n, row["step_error_pct"], expect)
    assert row["prediction_file"] == T + "/advisor-strong.json", row
    assert rows[("resnet50", "weak", n)]["prediction_file"] == T + "/advisor.json", rows
drawn = {(p["file"], mode) for p in rep2["predictions"] for mode in p["curves"]}
assert drawn == {(T + "/advisor.json", "weak"), (T + "/advisor-strong.json", "strong")}, drawn
assert [p["predicted"] for p in rep2["plots"] if p["png"] == "plots/speedup.png"] == [["resnet50 strong",
                                                                                      "resnet50 weak"]], rep2["plots"]
print("scaletrain-advisor's own JSON read: weak series compared, strong batch mismatch said; with a second "
      "file for the strong series, both compared")
PY

echo "== scaletrain-study report passes --prediction on"
"$PY" "$SRC/src/study/scaletrain_study.py" report "$S" --prediction "$T/resnet20.advice.json" >/dev/null
grep -q "resnet20.advice.json" "$S/report/scaling.md" || fail "scaletrain-study report dropped --prediction"
grep -q "resnet50.advice.json" "$S/report/scaling.md" && fail "the report of scaletrain-study report is stale"

echo "== errors"
lacks="its calibration is of model 'vgg16', which this study does not have (the study's models: resnet50, resnet20)"
expect_failure "a model the study lacks" "$lacks" \
  "${REPORT[@]}" "$S" --prediction "$T/vgg16.advice.json" --output "$T/refused"
expect_failure "the file named" "$T/vgg16.advice.json" \
  "${REPORT[@]}" "$S" --prediction "$T/vgg16.advice.json" --output "$T/refused"
[ ! -e "$T/refused" ] || fail "a refused prediction still wrote a report"
rc=0; "${REPORT[@]}" "$S" --prediction "$T/vgg16.advice.json" --output "$T/refused" 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "a prediction for another model exited $rc, expected 2"
expect_failure "not advice" "not a prediction of \`scaletrain-advisor predict --json\`" \
  "${REPORT[@]}" "$S" --prediction "$S/study.json"
expect_failure "no such file" "cannot read prediction $T/none.json" "${REPORT[@]}" "$S" --prediction "$T/none.json"
$PY - "$T" <<'PY'
import json, sys
T = sys.argv[1]
a = json.load(open(T + "/resnet50.advice.json"))
del a["series"]["weak"][2]["step_s"]
json.dump(a, open(T + "/broken.advice.json", "w"))
PY
expect_failure "a point without step_s" "series.weak[2] lacks or has a bad step_s" \
  "${REPORT[@]}" "$S" --prediction "$T/broken.advice.json"
echo "scaling report prediction passed"
