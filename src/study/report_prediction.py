"""Predictions of `scaletrain-advisor predict --json` set beside the measured scaling.

Each advice file's calibration names its model. A model may have several: one `predict` run
has one batch, so a study whose strong and weak series use different batches needs one file per
series (`--scaling strong` and `--scaling weak`). A measured row is compared with the first
file's predicted point of the same mode at the same GPU count (ranks) that computes the same
samples per rank per optimizer step: a prediction for another batch would measure the batch,
not the model. Errors are (predicted - measured) / measured in percent, on the mean step
time and on the median throughput. A translation model's batches and throughput count tokens:
its advisor batch is tokens per rank (the calibration's synthetic batches are that many tokens),
so its predicted "samples" per second are tokens per second, compared with the measured tokens/s.
The curves drawn on the plots use the study's nodes as x (GPUs / the series' ranks per node), so
a point inside one node is left out, and speedup and efficiency are taken against the series' own
baseline so that they overlay the measured ones.
"""

import math

from report_runs import ReportError, load_json_file
from report_scoring import throughput_key

ADVICE_FORMAT = "scaletrain-advice"
ADVICE_VERSION = 1
# Issue 14's target for the scaling model: step time within 15% of the measurement.
ERROR_TARGET = 0.15
POINT_KEYS = ("gpus", "nodes", "ranks_per_node", "per_rank_batch", "global_batch", "step_s", "samples_per_s",
              "epoch_s")
PREDICTION_COLUMNS = ("predicted_step_s", "predicted_throughput_samples_per_s", "step_error_pct",
                      "throughput_error_pct", "prediction_file", "prediction_note")


def number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def same_batch(a, b):
    """Batches compare equal up to rounding (the advisor writes a strong series' share as a double)."""
    return number(a) and number(b) and abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1.0)


# ---- Reading the advice files ----

def load_predictions(paths, study_models):
    """[prediction] from the --prediction files, in their order; refuses a model the study does not have."""
    predictions = []
    for path in paths:
        advice = load_json_file(path, "prediction")
        check_advice(advice, path)
        model = advice["calibration"]["model"]
        if model not in study_models:
            raise ReportError(f"--prediction {path}: its calibration is of model '{model}', which this study "
                              f"does not have (the study's models: {', '.join(study_models)})", exit_code=2)
        predictions.append(prediction_of(advice, path))
    return predictions


def check_advice(advice, path):
    """The keys the report reads, each error naming the file and the key."""
    if not isinstance(advice, dict) or advice.get("format") != ADVICE_FORMAT:
        raise ReportError(f"{path}: not a prediction of `scaletrain-advisor predict --json` (\"format\" is not "
                          f"\"{ADVICE_FORMAT}\")")
    if advice.get("version") != ADVICE_VERSION:
        raise ReportError(f"{path}: \"version\" is {advice.get('version')!r}; this tool reads version {ADVICE_VERSION}")
    if not isinstance(advice.get("calibration"), dict) or not isinstance(advice["calibration"].get("model"), str):
        raise ReportError(f"{path}: \"calibration\".\"model\" is missing")
    if not isinstance(advice.get("machine"), dict) or not isinstance(advice["machine"].get("gpus_per_node"), int):
        raise ReportError(f"{path}: \"machine\".\"gpus_per_node\" is missing")
    series = advice.get("series")
    if not isinstance(series, dict):
        raise ReportError(f"{path}: \"series\" is missing or not an object")
    for mode, points in series.items():
        if not isinstance(points, list):
            raise ReportError(f"{path}: series.{mode} is not a list")
        for i, p in enumerate(points):
            bad = [k for k in POINT_KEYS if not isinstance(p, dict) or not number(p.get(k))]
            if bad:
                raise ReportError(f"{path}: series.{mode}[{i}] lacks or has a bad {', '.join(bad)}")


def prediction_of(advice, path):
    """What the report keeps of an advice file: where it came from and its series."""
    cal, machine = advice["calibration"], advice["machine"]
    return {"file": path, "model": cal["model"],
            "calibration": {k: cal.get(k) for k in ("file", "model", "device", "precision", "source")},
            "machine": machine.get("name"), "gpus_per_node": machine["gpus_per_node"],
            "batch_per_gpu": advice.get("batch_per_gpu"), "series": advice["series"]}


# ---- The tables: a predicted point beside each measured row ----

def per_rank_samples(row):
    """Samples one rank computes per optimizer step, all micro-batches: global batch / ranks."""
    gb, ranks = row["global_batch"], row["ranks"]
    return gb / ranks if isinstance(gb, int) and isinstance(ranks, int) else None


def error_pct(predicted, measured):
    return 100.0 * (predicted - measured) / measured if number(predicted) and number(measured) and measured else None


def point_at(prediction, mode, gpus):
    return next((p for p in prediction["series"].get(mode) or [] if p["gpus"] == gpus), None)


def of_model(predictions, model):
    return [p for p in predictions if p["model"] == model]


def compare_rows(rows, predictions):
    """Adds the PREDICTION_COLUMNS to every row (None where the row's model has no prediction)."""
    for row in rows:
        row.update({c: None for c in PREDICTION_COLUMNS})
        candidates = of_model(predictions, row.get("model_name", row["model"]))
        if candidates:
            row["prediction_note"] = compare_row(row, candidates) or None


def compare_row(row, candidates):
    """Fills the predicted values and errors of one row from the first candidate with its point;
    returns the note ('' when nothing to say), or why no candidate compares."""
    with_mode = [p for p in candidates if row["mode"] in p["series"]]
    if not with_mode:
        return f"no prediction of the {row['mode']} series"
    at_gpus = [(p, point_at(p, row["mode"], row["ranks"])) for p in with_mode]
    at_gpus = [(p, point) for p, point in at_gpus if point is not None]
    if not at_gpus:
        return f"no predicted point at {row['ranks']} GPUs"
    measured_batch = per_rank_samples(row)
    match = next(((p, point) for p, point in at_gpus if same_batch(measured_batch, point["per_rank_batch"])), None)
    if match is None:
        predicted = ", ".join(fmt(point["per_rank_batch"]) for _, point in at_gpus)
        unit = "tokens" if row.get("unit") == "tokens" else "samples"
        return f"per-rank batch differs: measured {fmt(measured_batch)}, predicted {predicted} {unit} per step: " \
               "not compared"
    prediction, point = match
    row["prediction_file"] = prediction["file"]
    row["predicted_step_s"] = point["step_s"]
    row["predicted_throughput_samples_per_s"] = point["samples_per_s"]
    row["step_error_pct"] = error_pct(point["step_s"], row["step_s"])
    row["throughput_error_pct"] = error_pct(point["samples_per_s"], row[throughput_key(row)])
    return "; ".join(caveats(row, point))


def caveats(row, point):
    """What differs between the run and the predicted configuration, though the batch is the same."""
    out = []
    if row["runs_used"] == 0:
        out.append("no finished run to compare")
    if (row["nodes"], row["ranks_per_node"]) != (point["nodes"], point["ranks_per_node"]):
        out.append(f"layout differs: measured {row['nodes']} node(s) x {row['ranks_per_node']} ranks, predicted "
                   f"{point['nodes']} x {point['ranks_per_node']}")
    if row.get("unit") == "tokens":
        # The trainer fills a rank's --batch-tokens with padded pairs of similar length; tokens/s counts the real
        # target tokens. The calibration's batches are that many real tokens, unpadded.
        out.append("tokens: measured in padded length-bucketed batches of at most this many tokens per rank, "
                   "counting real target tokens; predicted for batches of exactly that many")
    if isinstance(row["accumulate_steps"], int) and row["accumulate_steps"] > 1:
        # The calibration's batch curves price one batch: K micro-batches pay the fixed cost K times.
        out.append(f"measured as {row['accumulate_steps']} accumulated micro-batches of {row['batch_per_rank']}, "
                   "predicted as one batch")
    return out


def fmt(x):
    return "n/a" if x is None else f"{x:g}"


# ---- The plots: predicted curves on the study's node axis ----

def predicted_curves(rows, predictions, train_samples, warnings):
    """{(model, mode): {"file", "points"}}: the first prediction at the measured series' batch;
    each point nodes, gpus and the four plotted values, in node order."""
    curves = {}
    for (model, mode), series_rows in measured_series(rows).items():
        candidates = [p for p in of_model(predictions, series_rows[0].get("model_name", model)) if mode in p["series"]]
        found = next(((p, pts) for p in candidates for pts in [comparable_points(p, mode, series_rows)] if pts),
                     None)
        if found:
            prediction, points = found
            curves[(model, mode)] = {"file": prediction["file"], "points": curve(
                points, series_rows, train_samples.get(model), prediction, warnings)}
        elif candidates:
            warnings.append(f"{model} {mode}: no prediction at the study's {batch_name(mode)} "
                            f"({fmt(series_batch(series_rows, mode))}) in {', '.join(p['file'] for p in candidates)}: "
                            "not drawn")
    return curves


def batch_name(mode):
    return "global batch" if mode == "strong" else "per-rank batch"


def measured_series(rows):
    """{(model, mode): rows with a finished run}, the measured curves the prediction goes beside."""
    out = {}
    for r in rows:
        if r["runs_used"] > 0:
            out.setdefault((r["model"], r["mode"]), []).append(r)
    return out


def series_batch(series_rows, mode):
    """The one global batch (strong) or per-rank batch (weak) of a measured series, else None."""
    values = {r["global_batch"] if mode == "strong" else per_rank_samples(r) for r in series_rows}
    return values.pop() if len(values) == 1 else None


def comparable_points(prediction, mode, series_rows):
    """The predicted points of the series' batch that fall on whole nodes inside the measured range."""
    key = "global_batch" if mode == "strong" else "per_rank_batch"
    batch = series_batch(series_rows, mode)
    points = [p for p in prediction["series"][mode] if same_batch(p[key], batch)]
    # The study's ranks per node turns GPUs into its nodes; with the machine's GPUs per node this
    # leaves out the points inside one node, which have no place on a node axis, unless the series
    # measured runs inside one node (gpus = 1,2,4,8): those go at a share of a node, as the
    # measured ones (report_scoring.add_plot_positions).
    per_node = max((n for n in map(ranks_per_node, series_rows) if n), default=None)
    if per_node is None:
        return []
    xs = [r.get("x", r["nodes"]) for r in series_rows]
    lo, hi = min(xs), max(xs)
    in_node = {r["ranks"] for r in series_rows if str(r.get("point", "")).startswith("g")}
    out = []
    for p in points:
        if p["gpus"] in in_node:
            x = p["gpus"] / per_node
        elif p["gpus"] % per_node == 0:
            x = p["gpus"] // per_node
        else:
            continue
        if lo <= x <= hi:
            out.append(dict(p, x_nodes=x))
    return out


def ranks_per_node(row):
    if isinstance(row["ranks_per_node"], int):
        return row["ranks_per_node"]
    return row["ranks"] // row["nodes"] if isinstance(row["ranks"], int) else None


def curve(points, series_rows, train_samples, prediction, warnings):
    base_point = series_rows[0].get("baseline_point") or f"n{series_rows[0]['baseline_nodes']}"
    base_gpus = next((r["ranks"] for r in series_rows if r.get("point", f"n{r['nodes']}") == base_point), None)
    base = next((p for p in points if p["gpus"] == base_gpus), None)
    if base is None:
        warnings.append(f"prediction {prediction['file']}: no point at the baseline's {base_gpus} GPUs: predicted "
                        "speedup and efficiency not drawn")
    if not isinstance(train_samples, int):
        warn_once(warnings, f"prediction {prediction['file']}: study.json does not record the training samples "
                            f"of {prediction['model']}: predicted time per epoch is the advisor's (its calibration's "
                            "dataset)")
    return [{"nodes": p["x_nodes"], "gpus": p["gpus"], "throughput_samples_per_s": p["samples_per_s"],
             "time_per_epoch_s": epoch_seconds(p, train_samples),
             "speedup": p["samples_per_s"] / base["samples_per_s"] if base else None,
             "efficiency": p["samples_per_s"] / base["samples_per_s"] / (p["gpus"] / base["gpus"]) if base else None}
            for p in points]


def warn_once(warnings, text):
    if text not in warnings:  # one per prediction, not one per mode
        warnings.append(text)


def epoch_seconds(point, train_samples):
    """An epoch of the study's dataset at the predicted step time (the trainer's steps per epoch:
    whole global batches); the advisor's epoch_s, of the calibration's dataset, when the study
    does not record its sample count."""
    if isinstance(train_samples, int) and train_samples >= point["global_batch"]:
        return (train_samples // int(round(point["global_batch"]))) * point["step_s"]
    return point["epoch_s"]


def study_train_samples(study):
    """{model: training samples} from study.json parameters.models, where recorded; for a translation
    model (batch_unit tokens) its training split's target tokens, the unit of its global batch (an
    epoch of whole global batches of real tokens: fewer steps than the padded batches take)."""
    models = (study.get("parameters") or {}).get("models") or []
    return {m["name"]: m.get("train_tokens" if m.get("batch_unit") == "tokens" else "train_samples")
            for m in models if isinstance(m, dict) and "name" in m}


def prediction_summary(prediction, curves):
    """A prediction as scaling.json lists it: its source and the curves the plots drew of it."""
    drawn = {mode: c["points"] for (model, mode), c in curves.items()
             if model == prediction["model"] and c["file"] == prediction["file"]}
    return {**{k: prediction[k] for k in ("file", "model", "calibration", "machine", "gpus_per_node",
                                          "batch_per_gpu")}, "curves": drawn}
