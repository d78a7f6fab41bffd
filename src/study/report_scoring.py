"""The scaling table: one row per (model, mode, node count), built from the runs that finished.

Over the repeats of a point: throughput and time per epoch are medians (one slow repeat does not
move them), with min and max beside them; the step-time split is a mean, so that its parts add up
to the mean step. Speedup and efficiency compare each point with the smallest node count of its
series (model, mode) that has a finished run. Time to target is scored as the MLPerf training
rules score a benchmark (mlcommons/training_policies, training_rules.adoc, "Benchmark Results").
"""

import math
import statistics

# Runs per benchmark result in the MLPerf training rules: 5 for image classification (ResNet), 10 for the
# language benchmarks (the Transformer's translation).
MLPERF_RUNS_REQUIRED = {"resnet50": 5, "resnet20": 5, "transformer": 10}
MLPERF_RUNS_DEFAULT = 5
# What a series' throughput counts: samples (images, ratings; sentence pairs), or the target tokens of a
# translation model (report.json throughput.tokens_per_s), which its speedup and efficiency compare.
TOKEN_KEYS = ("throughput_tokens_per_s", "throughput_min_tokens_per_s", "throughput_max_tokens_per_s",
              "throughput_per_rank_tokens_per_s")


def throughput_key(row, kind=""):
    """The row's throughput column in its unit: kind "" (the median), "min_", "max_" or "per_rank_"."""
    return f"throughput_{kind}{'tokens' if row.get('unit') == 'tokens' else 'samples'}_per_s"


SPLIT_PARTS = ("step_s", "compute_s", "exposed_comm_s", "data_wait_s")
MODE_ORDER = {"strong": 0, "weak": 1}


def finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def median_or_none(values):
    values = [v for v in values if finite(v)]
    return statistics.median(values) if values else None


def mean_or_none(values):
    values = [v for v in values if finite(v)]
    return statistics.fmean(values) if values else None


def min_max(values):
    values = [v for v in values if finite(v)]
    return (min(values), max(values)) if values else (None, None)


def mlperf_score(times, not_converged=0, required=MLPERF_RUNS_DEFAULT):
    """Scores time-to-target runs as the MLPerf training rules do.

    times: seconds of the runs that reached the target; not_converged: runs that ended without it.
    With at least `required` runs: drop the fastest and the slowest, mean of the rest; one
    non-converged run may be the dropped slowest, more than one makes the result invalid. With
    fewer runs the plain mean of the converged ones is given, flagged as not an MLPerf score."""
    times = sorted(float(t) for t in times)
    total = len(times) + not_converged
    score = {"value_s": None, "method": None, "mlperf_valid": False, "runs_converged": len(times),
             "runs_not_converged": not_converged, "runs_required": required, "note": ""}
    if not times:
        score["note"] = "no run reached the target"
    elif total < required:
        score.update(value_s=statistics.fmean(times), method="mean",
                     note=f"{total} run(s), fewer than the {required} the MLPerf rules need: plain mean of "
                          f"the {len(times)} that reached the target, not an MLPerf score")
    elif not_converged > 1:
        score.update(value_s=statistics.fmean(times), method="mean",
                     note=f"{not_converged} runs did not reach the target (the MLPerf rules allow 1): result "
                          f"invalid; plain mean of the {len(times)} that did")
    else:
        ordered = times + [math.inf] * not_converged  # a non-converged run counts as the slowest
        kept = ordered[1:-1]
        score.update(value_s=statistics.fmean(kept), method="mlperf", mlperf_valid=True,
                     note=f"MLPerf: {total} runs, fastest and slowest dropped, mean of {len(kept)}")
    return score


def group_runs(records):
    """{(model, mode, nodes, ranks): [records]} in study order of models (series), then strong before
    weak, then ranks: a point of a series is its rank count (1, 2, 4 GPUs of one node, then nodes)."""
    models = []
    for r in records:
        if r["model"] not in models:
            models.append(r["model"])
    groups = {}
    for r in records:
        groups.setdefault((r["model"], r["mode"], r["nodes"], r["ranks"]), []).append(r)
    order = sorted(groups, key=lambda k: (models.index(k[0]), MODE_ORDER.get(k[1], 9), k[1], k[3], k[2]))
    return {k: groups[k] for k in order}


def distinct(records, key):
    """The single value of a key over the records, or the sorted values joined when they differ."""
    values = sorted({r[key] for r in records if r[key] is not None}, key=str)
    if not values:
        return None
    return values[0] if len(values) == 1 else "/".join(str(v) for v in values)


def build_row(key, runs):
    model, mode, nodes, _ = key
    used = [r for r in runs if r["state"] == "ok" and r["metrics"]]
    metric = lambda name: [r["metrics"][name] for r in used]  # noqa: E731 (a short reader)
    tput_min, tput_max = min_max(metric("throughput_samples_per_s"))
    tpe_min, tpe_max = min_max(metric("time_per_epoch_s"))
    unit = "tokens" if any(r.get("unit") == "tokens" for r in runs) else "samples"
    tokens = {k: None for k in TOKEN_KEYS}
    if unit == "tokens":
        tok_min, tok_max = min_max(metric("throughput_tokens_per_s"))
        tokens = {"throughput_tokens_per_s": median_or_none(metric("throughput_tokens_per_s")),
                  "throughput_min_tokens_per_s": tok_min, "throughput_max_tokens_per_s": tok_max,
                  "throughput_per_rank_tokens_per_s": median_or_none(metric("throughput_per_rank_tokens_per_s"))}
    row = {
        "model": model, "model_name": runs[0].get("model_name", model), "point": runs[0].get("point", f"n{nodes}"),
        "mode": mode, "nodes": nodes, "ranks": distinct(runs, "ranks"),
        "ranks_per_node": distinct(runs, "ranks_per_node"), "global_batch": distinct(runs, "global_batch"),
        "batch_per_rank": distinct(runs, "batch_per_rank"), "accumulate_steps": distinct(runs, "accumulate_steps"),
        "runs_planned": len(runs), "runs_used": len(used),
        "runs_missing": sum(r["state"] == "missing" for r in runs),
        "runs_failed": sum(r["state"] == "failed" for r in runs),
        "throughput_samples_per_s": median_or_none(metric("throughput_samples_per_s")),
        "throughput_min_samples_per_s": tput_min, "throughput_max_samples_per_s": tput_max,
        "throughput_per_rank_samples_per_s": median_or_none(metric("throughput_per_rank_samples_per_s")),
        "time_per_epoch_s": median_or_none(metric("time_per_epoch_s")),
        "time_per_epoch_min_s": tpe_min, "time_per_epoch_max_s": tpe_max,
        "time_per_epoch_source": distinct_sources(used, "time_per_epoch_source"),
        "speedup": None, "efficiency": None, "baseline_nodes": None, "baseline_point": None,
        "unit": unit, **tokens,
    }
    row.update(split_row(used))
    row["time_to_target"] = time_to_target_row(row["model_name"], runs)
    return row


def distinct_sources(used, key):
    return "; ".join(sorted({r["metrics"][key] for r in used})) or None


def split_row(used):
    """Mean over repeats of each part of the step; "other" is the step time the three parts leave."""
    splits = [r["metrics"]["step_split"] for r in used if r["metrics"]["step_split"]]
    out = {part: mean_or_none([s[part] for s in splits]) for part in SPLIT_PARTS}
    parts = [out[p] for p in SPLIT_PARTS[1:]]
    out["other_s"] = (max(0.0, out["step_s"] - sum(parts))
                      if finite(out["step_s"]) and all(finite(p) for p in parts) else None)
    out["step_split_source"] = "; ".join(sorted({r["metrics"]["step_split_source"] for r in used})) or None
    out["allreduce_mb_per_step"] = mean_or_none([r["metrics"].get("allreduce_mb_per_step") for r in used
                                                 if r["metrics"].get("allreduce_mb_per_step") is not None])
    return out


def time_to_target_row(model, runs):
    """MLPerf-scored time to target over the repeats that had a target; None when none had one."""
    with_target = [r for r in runs if r["converged"] is not None]
    if not with_target:
        return None
    times = [r["metrics"]["time_to_target_s"] for r in with_target
             if r["converged"] and r["metrics"] and finite(r["metrics"]["time_to_target_s"])]
    # A run that failed, or finished without the target, did not converge; a missing run (never
    # ran) is not counted at all: the note then shows fewer runs than the rules need.
    not_converged = sum(r["state"] == "failed" or (r["state"] == "ok" and not r["converged"]) for r in runs)
    return mlperf_score(times, not_converged, MLPERF_RUNS_REQUIRED.get(model, MLPERF_RUNS_DEFAULT))


def add_speedups(rows):
    """Speedup and efficiency of each row against the smallest run (rank count) of its (model, mode)."""
    baselines = {}
    for row in rows:  # rows are in ascending rank order within a series
        series = (row["model"], row["mode"])
        if series not in baselines and row["runs_used"] > 0:
            baselines[series] = row
        base = baselines.get(series)
        if base is not None and row["runs_used"] > 0:
            row["baseline_nodes"] = base["nodes"]
            row["baseline_point"] = base["point"]
            row["speedup"], row["efficiency"] = speedup_efficiency(row, base)


def speedup_efficiency(row, base):
    """Strong: T(base)/T(N) on time per epoch. Weak: throughput(N)/throughput(base), in the series'
    unit (tokens/s for translation). Efficiency: speedup / (ranks(N)/ranks(base)), the ideal speedup
    being the growth in ranks."""
    if not (isinstance(row["ranks"], int) and isinstance(base["ranks"], int)):
        return None, None
    if row["mode"] == "strong":
        t_base, t = base["time_per_epoch_s"], row["time_per_epoch_s"]
        speedup = t_base / t if finite(t_base) and finite(t) and t > 0 else None
    else:
        x_base, x = base[throughput_key(base)], row[throughput_key(row)]
        speedup = x / x_base if finite(x_base) and finite(x) and x_base > 0 else None
    if speedup is None:
        return None, None
    return speedup, speedup / (row["ranks"] / base["ranks"])


def build_rows(records):
    rows = [build_row(key, runs) for key, runs in group_runs(records).items()]
    add_speedups(rows)
    add_plot_positions(rows)
    return rows


def add_plot_positions(rows):
    """x: where a row goes on a node axis: its nodes, or for G GPUs of one node G / the series' GPUs
    per node (a fraction of a node: 1, 2, 4 of 8 GPUs at 1/8, 1/4, 1/2, then 1, 2 ... nodes)."""
    per_node = {}
    for row in rows:
        if isinstance(row["ranks_per_node"], int):
            per_node[row["model"]] = max(per_node.get(row["model"], 0), row["ranks_per_node"])
    for row in rows:
        in_node = row["point"].startswith("g") and isinstance(row["ranks"], int) and per_node.get(row["model"])
        row["x"] = row["ranks"] / per_node[row["model"]] if in_node else row["nodes"]


def point_label(point):
    """"4 nodes", "1 node", "2 GPUs" (of one node) for a point nN or gG."""
    count = int(point[1:])
    if point.startswith("g"):
        return f"{count} GPU{'s' if count != 1 else ''}"
    return f"{count} node{'s' if count != 1 else ''}"


def point_sort_key(point):
    """GPUs of one node before whole nodes, each ascending."""
    return (0 if point.startswith("g") else 1, int(point[1:]))


def comparison(rows):
    """Side by side, per mode: each model's (series') speedup (and efficiency) at each point: node
    counts (keyed by str(nodes)) and GPU counts of one node (keyed gG, listed in "gpus")."""
    table = {}
    for row in rows:
        mode = table.setdefault(row["mode"], {"nodes": [], "gpus": [], "models": {}})
        in_node = row["point"].startswith("g")
        counts, count = (mode["gpus"], int(row["point"][1:])) if in_node else (mode["nodes"], row["nodes"])
        if count not in counts:
            counts.append(count)
        mode["models"].setdefault(row["model"], {})[row["point"] if in_node else str(row["nodes"])] = {
            "speedup": row["speedup"], "efficiency": row["efficiency"], "baseline_nodes": row["baseline_nodes"],
            "baseline_point": row["baseline_point"]}
    for mode in table.values():
        mode["nodes"].sort()
        mode["gpus"].sort()
    for row in rows:  # rows are in ascending rank order within a series: the first used is the baseline
        mode = table[row["mode"]].setdefault("communication", {})
        if row["model"] not in mode and row["runs_used"] > 0:
            mode[row["model"]] = communication(row)
    return table


def communication(row):
    """A model's (series') gradient traffic against its compute, at its baseline (smallest) run: the
    megabytes each rank all-reduces per optimizer step, the compute milliseconds of that step
    (forward + backward + optimizer, mean over the repeats) and their ratio. The higher the ratio,
    the sooner communication outgrows compute as ranks are added (AlexNet's 61 M parameters on
    little compute against GoogLeNet's 13 M)."""
    mb, compute = row.get("allreduce_mb_per_step"), row.get("compute_s")
    return {"point": row["point"], "nodes": row["nodes"], "ranks": row["ranks"],
            "batch_per_rank": row["batch_per_rank"], "accumulate_steps": row["accumulate_steps"],
            "unit": row.get("unit", "samples"),
            "allreduce_mb_per_step": mb,
            "compute_ms_per_step": compute * 1e3 if finite(compute) else None,
            "mb_per_compute_ms": mb / (compute * 1e3) if finite(mb) and finite(compute) and compute > 0 else None}
