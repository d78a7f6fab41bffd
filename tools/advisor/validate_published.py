#!/usr/bin/env python3
"""The scaling model against published DGX-1 results (issue 14, "Validation"): for each point of
share/advisor/published_dgx1.json that the model can be compared with, runs `scaletrain-advisor
predict` on the shipped DGX-1 machine file and the matching calibration, and prints a markdown
table of predicted against published, with the error of each point. Run from the repository root
after building:  /usr/bin/python3 tools/advisor/validate_published.py [build/bin]"""
import json
import os
import subprocess
import sys
import tempfile

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/bin"
CAL = "share/advisor/calibrations/"
R50_06, R50_05, NCF = CAL + "resnet50-v100-mixed-mlperf-v0.6.json", CAL + "resnet50-v100-mixed-mlperf-v0.5.json", \
    CAL + "ncf-v100-mixed-dle.json"
published = {p["id"]: p for p in json.load(open("share/advisor/published_dgx1.json"))["points"]}


def predict(calibration, gpus, batch, scaling):
    """The advisor's series for `gpus` (a list) at `batch` per GPU (strong: at the first point)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "advice.json")
        subprocess.run([os.path.join(BIN, "scaletrain-advisor"), "predict", "--calibration", calibration,
                        "--gpus", ",".join(map(str, gpus)), "--batch", str(batch), "--scaling", scaling,
                        "--json", out], check=True, stdout=subprocess.DEVNULL)
        return json.load(open(out))["series"][scaling]


rows = []


def row(point_id, what, predicted, measured, unit, note, scale=1.0):
    err = (predicted - measured) / measured * 100
    rows.append((point_id, what, f"{predicted * scale:.4g} {unit}", f"{measured * scale:.4g} {unit}", f"{err:+.0f}%", note))


def step_point(point_id, calibration, note):
    p = published[point_id]
    s = predict(calibration, [p["gpus"]], p["per_gpu_batch"], "weak")[0]
    row(point_id, f"step time, {p['gpus']} GPUs x {p['per_gpu_batch']}", s["step_s"], p["steady_step_time_s"], "ms",
        note, 1e3)


step_point("mlperf06-rn50-dgx1-n1", R50_06, "the calibration's anchor (equal by construction, but for the in-node exposure)")
step_point("mlperf06-rn50-dgx1-n130", R50_06, "130 nodes, one version's software: the model's check")
step_point("mlperf07-rn50-dgx1-n1", R50_06, "v0.7 software with the v0.6 calibration")
step_point("mlperf05-rn50-dgx1-n1", R50_05, "the v0.5 calibration's anchor")
step_point("mlperf05-rn50-dgx1-n80", R50_05, "80 nodes, v0.5 software")

# NCF, strong scaling from one GPU at the global batch of 1,048,576 (DeepLearningExamples).
ncf = predict(NCF, [1, 8], 1048576, "strong")
dle8 = published["dle-ncf-amp-8gpu"]
row("dle-ncf-amp-8gpu", "throughput, 8 GPUs x 131,072", ncf[1]["samples_per_s"], dle8["samples_per_s"], "M samples/s",
    "1 GPU is the calibration's anchor", 1e-6)
row("dle-ncf-amp-8gpu", "speedup 1 -> 8 GPUs", ncf[1]["speedup"], dle8["speedup_vs"]["value"], "x", "strong scaling")
ml = published["mlperf05-ncf-dgx1-n1"]
row("mlperf05-ncf-dgx1-n1", "training throughput, 8 GPUs x 131,072", ncf[1]["samples_per_s"],
    ml["train_part_samples_per_s"], "M samples/s", "MLPerf v0.5 logs, the training part of each epoch", 1e-6)

# One-node speedups of DeepLearningExamples' PyTorch ResNet-50 (AMP, 256 per GPU by its README).
r50 = predict(R50_06, [1, 8], 256, "weak")
row("dle-rn50-pt-amp-8gpu", "speedup 1 -> 8 GPUs (256 per GPU)", r50[1]["speedup"],
    published["dle-rn50-pt-amp-8gpu"]["speedup_vs"]["value"], "x", "PyTorch, not MXNet; batch assumed 256")

# Seed 000's one-node speedups (not verified in a primary source; see docs/scaling-model-sources.md).
for model, cal, batch in (("resnet50", R50_06, 208), ("ncf", NCF, 1048576)):
    for scaling in ("weak", "strong"):
        s = predict(cal, [1, 4, 8], batch if scaling == "weak" or model == "ncf" else 208, scaling)
        if model == "ncf" and scaling == "weak":
            s = predict(cal, [1, 4, 8], 131072, "weak")
        for gpus, point in ((4, s[1]), (8, s[2])):
            pid = f"seed000-{model}-{gpus}gpu"
            row(pid, f"speedup 1 -> {gpus} GPUs, {scaling}", point["speedup"], published[pid]["speedup_vs"]["value"], "x",
                "unverified source")

# Goyal et al.: ~90% efficiency from 8 to 256 GPUs at 32 per GPU (P100 servers on 50 Gb/s Ethernet,
# not a DGX-1): the DGX-1 model's figure beside it, for scale only.
g = predict(R50_06, [8, 256], 32, "weak")
row("goyal2017-rn50-256gpu", "efficiency 8 -> 256 GPUs (32 per GPU)", g[1]["efficiency"],
    published["goyal2017-rn50-256gpu"]["scaling_efficiency_8_to_256"], "", "another machine: not a check", 100)

print("| published point | what | predicted | published | error | note |")
print("|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
