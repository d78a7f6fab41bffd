"""Writing scaling.csv, scaling.json and scaling.md from the rows, run records and straggler flags.

The CSV and JSON keep full precision (for scripts and for checking against report.json); the
Markdown rounds for reading. Every file is written under a temporary name and renamed, so a
report job killed half-way never leaves a truncated table behind.
"""

import csv
import io
import json
import math
import os
import time

from report_scoring import TOKEN_KEYS, point_label, throughput_key

CSV_COLUMNS = [
    # model: the series (its name in study.json; a study without [series] sections names each after its
    # model); model_name: scaletrain's model; point: nN (N nodes) or gG (G GPUs of one node).
    "model", "mode", "nodes", "ranks", "ranks_per_node", "global_batch", "batch_per_rank", "accumulate_steps",
    "runs_planned", "runs_used", "runs_missing", "runs_failed",
    "throughput_samples_per_s", "throughput_min_samples_per_s", "throughput_max_samples_per_s",
    "throughput_per_rank_samples_per_s", "time_per_epoch_s", "time_per_epoch_min_s", "time_per_epoch_max_s",
    "baseline_nodes", "speedup", "efficiency",
    "time_to_target_s", "time_to_target_method", "time_to_target_runs_converged", "time_to_target_runs_not_converged",
    "step_s", "compute_s", "exposed_comm_s", "data_wait_s", "other_s", "allreduce_mb_per_step",
    "time_per_epoch_source", "step_split_source",
    # Against a prediction (--prediction): empty where the row's model has none, or not comparable.
    "predicted_step_s", "predicted_throughput_samples_per_s", "step_error_pct", "throughput_error_pct",
    "prediction_file", "prediction_note", "model_name", "point",
]
# A study with translation runs (throughput in tokens: report.json throughput.tokens_per_s) adds these
# after the columns above; the samples columns of its translation rows count sentence pairs. A study
# without them keeps the columns above alone.
TOKEN_COLUMNS = ["unit", *TOKEN_KEYS]
NOT_RECORDED = "not recorded"


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def csv_value(row, column):
    if column.startswith("time_to_target_"):
        ttt = row["time_to_target"] or {}
        key = {"time_to_target_s": "value_s", "time_to_target_method": "method",
               "time_to_target_runs_converged": "runs_converged",
               "time_to_target_runs_not_converged": "runs_not_converged"}[column]
        value = ttt.get(key)
    else:
        value = row[column]
    return "" if value is None else value


def csv_columns(rows):
    return CSV_COLUMNS + (TOKEN_COLUMNS if any(r.get("unit") == "tokens" for r in rows) else [])


def csv_text(rows):
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    columns = csv_columns(rows)
    writer.writerow(columns)
    for row in rows:
        writer.writerow([csv_value(row, c) for c in columns])
    return buf.getvalue()


def finite_only(value):
    """The value with NaN and infinities (not JSON) replaced by null, at any depth."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_only(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite_only(v) for v in value]
    return value


def json_text(report):
    return json.dumps(finite_only(report), indent=2, allow_nan=False) + "\n"


# ---- Markdown ----

def num(x, digits=3, missing="n/a"):
    """x to `digits` significant digits, without exponent for everyday magnitudes."""
    if x is None:
        return missing
    if x == 0:
        return "0"
    if abs(x) >= 10 ** digits:
        return f"{x:.0f}"
    text = f"{x:.{digits}g}"
    if "e" in text and abs(x) >= 1e-4:
        text = f"{x:.{max(0, digits - 1)}f}"
    return text


def ms(x):
    return num(x * 1000.0 if x is not None else None, 3, NOT_RECORDED)


def pct(x):
    return "n/a" if x is None else f"{x * 100:.0f}%"


def spread(lo, hi, digits=4):
    return "n/a" if lo is None else f"{num(lo, digits)}–{num(hi, digits)}"


def table(header, lines):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in line) + " |" for line in lines]
    return "\n".join(out) + "\n"


def batch_cell(row):
    acc = row["accumulate_steps"]
    tokens = " tokens" if row.get("unit") == "tokens" else ""
    return f"{row['batch_per_rank']}{tokens}" + (f" x {acc}" if acc not in (None, 1) else "")


def rate_unit(row):
    """"tokens/s" for a translation series, "samples/s" for the others."""
    return "tokens/s" if row.get("unit") == "tokens" else "samples/s"


def nodes_cell(row):
    """The nodes column: N, or "1 (G GPUs)" for a run on G GPUs of one node."""
    point = row.get("point") or ""
    return f"1 ({point[1:]} GPU{'s' if point[1:] != '1' else ''})" if point.startswith("g") else row["nodes"]


def scaling_table(rows):
    """One series' rows (one unit): samples/s, or tokens/s for a translation model's."""
    unit = rate_unit(rows[0]) if rows else "samples/s"
    batches = (["global batch", "batch/rank (x accumulate)"] if unit == "samples/s" else
               ["global batch (tokens)", "batch/rank (tokens)"])
    header = ["nodes", "ranks", *batches, "runs used", f"{unit} (median)",
              f"{unit} min–max", f"{unit} per rank", "time/epoch s (median)", "time/epoch min–max",
              "speedup", "efficiency"]
    lines = [[nodes_cell(r), r["ranks"], r["global_batch"],
              batch_cell(r) if unit == "samples/s" else r["batch_per_rank"], f"{r['runs_used']}/{r['runs_planned']}",
              num(r[throughput_key(r)], 4),
              spread(r[throughput_key(r, "min_")], r[throughput_key(r, "max_")]),
              num(r[throughput_key(r, "per_rank_")], 4), num(r["time_per_epoch_s"], 4, NOT_RECORDED),
              spread(r["time_per_epoch_min_s"], r["time_per_epoch_max_s"]),
              num(r["speedup"], 3), pct(r["efficiency"])] for r in rows]
    return table(header, lines)


MODE_TITLES = {"strong": "Strong scaling (global batch fixed)", "weak": "Weak scaling (batch per rank fixed)"}


def series_sections(rows):
    out = []
    for model in unique(r["model"] for r in rows):
        out.append(f"## {model}\n")
        for mode in unique(r["mode"] for r in rows if r["model"] == model):
            series = [r for r in rows if r["model"] == model and r["mode"] == mode]
            base = next((r for r in series if r["baseline_nodes"] is not None), None)
            out.append(f"### {MODE_TITLES.get(mode, mode)}\n")
            if base is None:
                out.append("No finished run in this series: no speedup.\n")
            elif (base.get("baseline_point") or "n").startswith("g"):
                out.append(f"Speedup and efficiency against {point_label(base['baseline_point'])} of one node.\n")
            else:
                out.append(f"Speedup and efficiency against {base['baseline_nodes']} node(s).\n")
            out.append(scaling_table(series))
    return "\n".join(out)


def unique(items):
    seen = []
    for i in items:
        if i not in seen:
            seen.append(i)
    return seen


def comparison_section(comp):
    out = ["## Models side by side\n",
           "Speedup (and efficiency) of each model against its smallest node count, per mode.\n"]
    for mode, data in comp.items():
        # GPUs of one node first (a series' runs inside a node), then whole nodes.
        keys = [f"g{g}" for g in data.get("gpus", [])] + [str(n) for n in data["nodes"]]
        header = ["model"] + [f"{k[1:]} GPU{'s' if k != 'g1' else ''}" if k.startswith("g") else
                              f"{k} node{'s' if k != '1' else ''}" for k in keys]
        lines = []
        for model, by_nodes in data["models"].items():
            cells = []
            for n in keys:
                c = by_nodes.get(n)
                cells.append("–" if c is None or c["speedup"] is None
                             else f"{num(c['speedup'], 3)} ({pct(c['efficiency'])})")
            lines.append([model] + cells)
        out.append(f"### {mode}\n")
        out.append(table(header, lines))
        out.append(communication_table(data.get("communication", {})))
    return "\n".join(out)


def communication_table(comm):
    """Each model's all-reduce megabytes per step against its compute, at its baseline run."""
    if not comm:
        return ""
    header = ["model", "at", "batch per rank", "all-reduce MB/step", "compute ms/step", "MB per compute ms"]
    lines = [[model, point_label(c["point"]), batch_cell(c), num(c["allreduce_mb_per_step"], 4),
              num(c["compute_ms_per_step"], 4), num(c["mb_per_compute_ms"], 3)] for model, c in comm.items()]
    return ("\nGradient traffic against compute, at each model's smallest run (the speedups' baseline): the "
            "megabytes each rank all-reduces per optimizer step, the compute (forward + backward + optimizer) of "
            "that step, and their ratio. The higher the ratio, the sooner communication outgrows compute as GPUs "
            "and nodes are added.\n\n" + table(header, lines))


def time_to_target_section(rows):
    scored = [r for r in rows if r["time_to_target"] is not None]
    if not scored:
        return ("## Time to target\n\nNo run of this study had a target accuracy (`--target-accuracy`): "
                "time to target not measured.\n")
    header = ["model", "mode", "nodes", "time to target s", "reached / not", "scoring"]
    lines = [[r["model"], r["mode"], nodes_cell(r), num(r["time_to_target"]["value_s"], 4),
              f"{r['time_to_target']['runs_converged']} / {r['time_to_target']['runs_not_converged']}",
              r["time_to_target"]["note"]] for r in scored]
    return ("## Time to target\n\nMLPerf time to train (run_stop − run_start in mllog.txt) of the runs that "
            "reached the target, scored over the repeats as the MLPerf training rules score a benchmark "
            "(5 runs for ResNet: drop the fastest and the slowest, mean of the other 3).\n\n" + table(header, lines))


def split_section(rows):
    header = ["model", "mode", "nodes", "step ms", "compute ms", "exposed comm ms", "data wait ms", "other ms",
              "all-reduce MB/step", "MB per compute ms", "source"]
    lines = [[r["model"], r["mode"], nodes_cell(r), ms(r["step_s"]), ms(r["compute_s"]), ms(r["exposed_comm_s"]),
              ms(r["data_wait_s"]), ms(r["other_s"]), num(r.get("allreduce_mb_per_step"), 4),
              num(mb_per_compute_ms(r), 3), r["step_split_source"] or NOT_RECORDED] for r in rows]
    return ("## Step time split\n\nPer optimizer step, mean over the repeats: compute (forward + backward + "
            "optimizer), exposed communication (waiting for gradients after backward), data wait, and the "
            "rest of the step; then the gradient megabytes each rank all-reduces per step, and per "
            "millisecond of compute: the higher that ratio, the sooner communication outgrows compute as "
            "nodes are added (NCF's dense embedding gradients against ResNet's convolutions).\n\n"
            + table(header, lines))


def mb_per_compute_ms(row):
    mb, compute = row.get("allreduce_mb_per_step"), row.get("compute_s")
    return mb / (compute * 1e3) if mb is not None and compute else None


def problems_section(records):
    bad = [r for r in records if r["state"] != "ok"]
    unconverged = [r for r in records if r["state"] == "ok" and r["converged"] is False]
    out = ["## Missing and failed runs\n"]
    if bad:
        out.append(f"{len(bad)} of {len(records)} runs are not in the tables above:\n")
        out.append(table(["run", "state", "reason", "directory"],
                         [[r["id"], r["state"], "; ".join(r["reasons"]), r["dir"]] for r in bad]))
    else:
        out.append(f"None: all {len(records)} runs finished.\n")
    if unconverged:
        out.append("\nRuns that finished without reaching the target (their speed is in the tables; they count "
                   "as not converged for the time to target):\n")
        out.append(table(["run", "reason"], [[r["id"], "; ".join(r["reasons"]) or "target not reached"]
                                             for r in unconverged]))
    return "\n".join(out)


def stragglers_section(s):
    out = ["## Stragglers\n", f"Rule: {s['rule']}. {s['runs_checked']} run(s) had per-rank step times.\n"]
    if s["runs"]:
        lines = [[run["run"], sr["rank"], sr["host"], ms(sr["p50_s"]), ms(run["median_p50_s"]),
                  pct(sr["above_median"])] for run in s["runs"] for sr in run["slow_ranks"]]
        out.append(table(["run", "rank", "host", "p50 ms", "run median p50 ms", "above median"], lines))
        out.append("\nHosts with slow ranks, over the study:\n")
        out.append(table(["host", "runs flagged", "runs timed", "flagged in"],
                         [[h["host"], h["runs_flagged"], h["runs_timed"], ", ".join(h["runs"])] for h in s["hosts"]]))
    elif s["runs_checked"]:
        out.append("No rank was slower than the margin.\n")
    if s["runs_without_step_time"]:
        out.append(f"\nPer-rank step times not recorded (report.json has no step_time) in: "
                   f"{', '.join(s['runs_without_step_time'])}.\n")
    return "\n".join(out)


def traces_section(traces):
    if not traces:
        return "## Traces\n\nNo run recorded traces (`scaletrain train --trace`).\n"
    lines = [[t["run"], t.get("ranks", ""), t.get("events", ""),
              os.path.basename(t["file"]) if t.get("file") else t.get("error", "")] for t in traces]
    return ("## Traces\n\nMerged per-rank timelines; open them in https://ui.perfetto.dev or chrome://tracing.\n\n"
            + table(["run", "ranks", "events", "file"], lines))


def signed_pct(x):
    return "n/a" if x is None else f"{x:+.1f}%"


def prediction_flag(row, target):
    errors = [abs(e) for e in (row["step_error_pct"], row["throughput_error_pct"]) if e is not None]
    return f"**above {target * 100:.0f}%**" if any(e > target * 100 for e in errors) else ("ok" if errors else "")


def prediction_section(report):
    predictions, target = report.get("predictions") or [], report.get("prediction_error_target")
    if not predictions:
        return ("## Prediction against measurement\n\nNo prediction given (`--prediction FILE`, written by "
                "`scaletrain-advisor predict --json`).\n")
    out = ["## Prediction against measurement\n",
           "Each measured point beside the point of `scaletrain-advisor predict` at the same GPU count, mode and "
           "samples per rank per step; error = (predicted − measured) / measured, on the mean step time and the "
           f"median throughput. Flagged above {target * 100:.0f}%, the scaling model's target. The column *file* "
           "numbers the prediction used:\n",
           "\n".join(f"{i}. {p['model']}: `{p['file']}` (calibration {p['calibration']['file']}, "
                     f"{p['calibration']['device']}, {p['calibration']['precision']}; machine {p['machine']})"
                     for i, p in enumerate(predictions, 1)) + "\n"]
    number_of = {p["file"]: i for i, p in reversed(list(enumerate(predictions, 1)))}
    models = {p["model"] for p in predictions}
    rows = [r for r in report["rows"] if r.get("model_name", r["model"]) in models]
    # A translation model's throughput and its prediction count tokens (the advisor's batch of a Transformer is
    # tokens): with such rows the throughput columns name each row's unit.
    mixed = any(r.get("unit") == "tokens" for r in rows)
    rate = "throughput" if mixed else "samples/s"
    in_unit = (lambda r, x: f"{num(x, 4)} {rate_unit(r)}" if mixed and x is not None else num(x, 4))  # noqa: E731
    header = ["model", "mode", "nodes", "GPUs", "batch/rank (x accumulate)", "step ms", "predicted step ms", "error",
              rate, f"predicted {rate}", "error", "flag", "file", "note"]
    lines = [[r["model"], r["mode"], nodes_cell(r), r["ranks"], batch_cell(r), ms(r["step_s"]),
              num(r["predicted_step_s"] * 1000 if r["predicted_step_s"] is not None else None, 3),
              signed_pct(r["step_error_pct"]), in_unit(r, r[throughput_key(r)]),
              in_unit(r, r["predicted_throughput_samples_per_s"]), signed_pct(r["throughput_error_pct"]),
              prediction_flag(r, target), number_of.get(r["prediction_file"], ""), r["prediction_note"] or ""]
             for r in rows]
    compared = [r for r in rows if r["step_error_pct"] is not None or r["throughput_error_pct"] is not None]
    flagged = [r for r in compared if prediction_flag(r, target) != "ok"]
    out.append(table(header, lines))
    out.append(f"\n{len(compared)} of {len(rows)} points compared, {len(flagged)} above {target * 100:.0f}%.\n")
    return "\n".join(out)


def plots_section(plots):
    if isinstance(plots, str):
        return f"## Plots\n\n{plots}\n"
    return "## Plots\n\n" + "\n".join(f"![{p['title']}]({p['png']}) ([SVG]({p['svg']}))\n" for p in plots)


def notes_section(records, warnings):
    lines = [f"- {r['id']}: {n}" for r in records for n in r["notes"]] + [f"- {w}" for w in warnings]
    return "## Notes\n\n" + ("\n".join(lines) if lines else "None.") + "\n"


def header_section(report):
    c = report["counts"]
    p = report.get("parameters") or {}
    params = ", ".join(f"{k} {json.dumps(p[k])}" for k in ("models", "modes", "nodes", "ranks_per_node",
                                                          "global_batch", "batch_per_rank", "global_batch_tokens",
                                                          "batch_tokens_per_rank", "lr_scaling",
                                                          "run_length", "repeats") if k in p)
    return (f"# Scaling report: {report['study']}\n\n"
            f"Study directory `{report['study_dir']}`, report made {report['generated']}. "
            f"{c['planned']} runs planned: {c['used']} used, {c['missing']} missing, {c['failed']} failed.\n\n"
            + (f"Parameters: {params}.\n\n" if params else "")
            + f"{report['statistics']}\n")


def markdown_text(report, records):
    parts = [header_section(report), series_sections(report["rows"]), comparison_section(report["comparison"]),
             prediction_section(report),
             time_to_target_section(report["rows"]), split_section(report["rows"]), problems_section(records),
             stragglers_section(report["stragglers"]), traces_section(report["traces"]),
             plots_section(report["plots"]), notes_section(records, report["warnings"])]
    return "\n".join(parts)


def generated_time():
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime())
