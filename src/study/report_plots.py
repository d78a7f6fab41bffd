"""The report's plots, each as PNG and SVG, with matplotlib's Agg backend (no display needed).

One panel per mode (strong, weak), one line per model, so that several models compare at a glance
(as in the MLPerf v0.5 DGX-1 study's speedup figure). Node counts go on a log2 axis (studies double
them); throughput and time per epoch on a log axis where they span a decade or more (several
models, many nodes: ideal scaling is then a straight line), else on a linear axis from 0. Error
bars span min to max over the repeats. A prediction (scaletrain-advisor, report_prediction.py) is
a dashed line of its model's colour with x markers, labelled "predicted"; the throughput plot's
per-model ideal is therefore dotted, so the two cannot be mistaken for each other. SVGs are
written without a date and with a fixed id salt so that re-running the report on the same runs
gives the same files.
"""

import os
from fractions import Fraction

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after the backend is chosen)
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402
from report_scoring import throughput_key  # noqa: E402

plt.rcParams["svg.hashsalt"] = "scaletrain-report"
MODE_TITLES = {"strong": "strong (global batch fixed)", "weak": "weak (batch per rank fixed)"}
SPLIT_COLOURS = {"compute_s": "#4c72b0", "exposed_comm_s": "#dd8452", "data_wait_s": "#55a868", "other_s": "#bbbbbb"}
SPLIT_LABELS = {"compute_s": "compute", "exposed_comm_s": "exposed communication", "data_wait_s": "data wait",
                "other_s": "other"}


def modes_of(rows):
    return sorted({r["mode"] for r in rows}, key=lambda m: (m != "strong", m))


def models_of(rows):
    seen = []
    for r in rows:
        if r["model"] not in seen:
            seen.append(r["model"])
    return seen


def series(rows, model, mode, key):
    """(x, values, rows) of the points of one series that have the value; x is the nodes, or a
    fraction of a node for the runs on some GPUs of one node (report_scoring.add_plot_positions)."""
    pts = [r for r in rows if r["model"] == model and r["mode"] == mode and r[key] is not None]
    return [r.get("x", r["nodes"]) for r in pts], [r[key] for r in pts], pts


def panels(rows, title):
    modes = modes_of(rows)
    fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4.2), squeeze=False)
    fig.suptitle(title)
    return fig, dict(zip(modes, axes[0]))


def nodes_axis(ax, rows):
    nodes = sorted({r.get("x", r["nodes"]) for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(nodes)
    # A share of a node (G of its GPUs) as a fraction: 1/8, 1/4, 1/2, then 1, 2, ... nodes.
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda x, _: f"{x:g}" if x >= 1 else str(Fraction(x).limit_denominator(64))))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("nodes" if all(x >= 1 for x in nodes) else "nodes (below 1: a share of one node's GPUs)")
    ax.grid(True, which="major", alpha=0.3)


def value_axis(ax):
    """A log axis where the values span a decade or more (models of different sizes), else linear."""
    values = [y for line in ax.get_lines() for y in line.get_ydata() if y > 0]
    if values and max(values) >= 10 * min(values):
        ax.set_yscale("log")
    elif values:
        ax.set_ylim(0, 1.1 * max(values))


def error_bars(pts, key, lo_key, hi_key):
    lows = [r[key] - r[lo_key] if r[lo_key] is not None else 0 for r in pts]
    highs = [r[hi_key] - r[key] if r[hi_key] is not None else 0 for r in pts]
    return [lows, highs]


def ideal_from_base(pts, key, inverse=False):
    """Ideal scaling of a series from its first point, by the growth in ranks."""
    base = pts[0]
    factor = lambda r: r["ranks"] / base["ranks"]  # noqa: E731
    return [base[key] / factor(r) if inverse else base[key] * factor(r) for r in pts]


def plot_predicted(ax, predicted, model, mode, key, colour, scale=1.0):
    """The model's predicted curve of `key`, if there is one; the SVG group id names it for scripts."""
    pts = [p for p in predicted.get((model, mode), []) if p[key] is not None]
    if pts:
        ax.plot([p["nodes"] for p in pts], [p[key] * scale for p in pts], "--", marker="x", color=colour,
                label=f"{model} predicted", gid=f"predicted-{model}-{mode}")


def plot_throughput(rows, ax, mode, predicted):
    """Each model in its unit: samples/s, or tokens/s for a translation model (the label says which
    where the units are mixed)."""
    units = {r.get("unit", "samples") for r in rows}
    for i, model in enumerate(models_of(rows)):
        model_rows = [r for r in rows if r["model"] == model]
        key = throughput_key(model_rows[0])
        nodes, values, pts = series(rows, model, mode, key)
        if not pts:
            continue
        colour = f"C{i}"
        label = f"{model} ({key.split('_')[1]}/s)" if len(units) > 1 else model
        ax.errorbar(nodes, values, yerr=error_bars(pts, key, throughput_key(pts[0], "min_"),
                                                   throughput_key(pts[0], "max_")),
                    marker="o", color=colour, capsize=3, label=label)
        ax.plot(nodes, ideal_from_base(pts, key), ":", color=colour, alpha=0.6,
                label=f"{model} ideal")
        # A prediction's throughput is in its model's unit (the advisor's batch of a Transformer is tokens).
        plot_predicted(ax, predicted, model, mode, "throughput_samples_per_s", colour)
    value_axis(ax)
    ax.set_ylabel({frozenset({"samples"}): "throughput, samples/s", frozenset({"tokens"}): "throughput, tokens/s"}
                  .get(frozenset(units), "throughput, samples/s or tokens/s"))


def plot_time_per_epoch(rows, ax, mode, predicted):
    for i, model in enumerate(models_of(rows)):
        nodes, values, pts = series(rows, model, mode, "time_per_epoch_s")
        if not pts:
            continue
        ax.errorbar(nodes, values, yerr=error_bars(pts, "time_per_epoch_s", "time_per_epoch_min_s",
                                                   "time_per_epoch_max_s"),
                    marker="o", color=f"C{i}", capsize=3, label=model)
        plot_predicted(ax, predicted, model, mode, "time_per_epoch_s", f"C{i}")
    value_axis(ax)
    ax.set_ylabel("time per epoch, s")


def plot_speedup(rows, ax, mode, predicted):
    longest = []
    for i, model in enumerate(models_of(rows)):
        nodes, values, pts = series(rows, model, mode, "speedup")
        if pts:
            ax.plot(nodes, values, marker="o", color=f"C{i}", label=model)
            plot_predicted(ax, predicted, model, mode, "speedup", f"C{i}")
            longest = max(longest, pts, key=len)
    if longest:  # one ideal line: the growth in ranks, the same for every model of a study
        ax.plot([r.get("x", r["nodes"]) for r in longest], [r["ranks"] / longest[0]["ranks"] for r in longest], "--",
                color="black", alpha=0.5, label="ideal")
    ax.set_ylabel("speedup")


def plot_efficiency(rows, ax, mode, predicted):
    for i, model in enumerate(models_of(rows)):
        nodes, values, _ = series(rows, model, mode, "efficiency")
        if nodes:
            ax.plot(nodes, [v * 100 for v in values], marker="o", color=f"C{i}", label=model)
            plot_predicted(ax, predicted, model, mode, "efficiency", f"C{i}", scale=100)
    ax.axhline(100, color="black", linestyle="--", alpha=0.5, label="ideal")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("parallel efficiency, %")


def plot_split(rows, ax, mode, model):
    pts = [r for r in rows if r["model"] == model and r["mode"] == mode and r["step_s"] is not None]
    labels = [f"{r['point'][1:]} GPU{'s' if r['point'] != 'g1' else ''}" if str(r.get("point", "")).startswith("g")
              else str(r["nodes"]) for r in pts]
    bottom = [0.0] * len(pts)
    for part, colour in SPLIT_COLOURS.items():
        heights = [(r[part] or 0.0) * 1000 for r in pts]
        ax.bar(labels, heights, bottom=bottom, color=colour, label=SPLIT_LABELS[part])
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_xlabel("nodes")
    ax.set_ylabel("time per optimizer step, ms")
    ax.grid(True, axis="y", alpha=0.3)


def save(fig, out_dir, name, title, predicted=()):
    fig.tight_layout()
    png, svg = os.path.join(out_dir, name + ".png"), os.path.join(out_dir, name + ".svg")
    fig.savefig(png, dpi=120)
    fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)
    return {"title": title, "png": os.path.join("plots", name + ".png"), "svg": os.path.join("plots", name + ".svg"),
            "predicted": list(predicted)}


def line_figure(rows, out_dir, name, title, draw, predicted):
    fig, axes = panels(rows, title)
    drawn = []
    for mode, ax in axes.items():
        draw(rows, ax, mode, predicted)
        nodes_axis(ax, rows)
        ax.set_title(MODE_TITLES.get(mode, mode))
        ax.legend(fontsize="small")
        drawn += [f"{label.split()[0]} {mode}" for label in ax.get_legend_handles_labels()[1]
                  if label.endswith(" predicted")]
    return save(fig, out_dir, name, title, drawn)


def split_figure(rows, out_dir, model):
    model_rows = [r for r in rows if r["model"] == model]
    fig, axes = panels(model_rows, f"{model}: step time split per node count (mean over repeats)")
    for mode, ax in axes.items():
        plot_split(model_rows, ax, mode, model)
        ax.set_title(MODE_TITLES.get(mode, mode))
        ax.legend(fontsize="small")
    return save(fig, out_dir, f"step_split-{model}", f"{model} step time split")


def make_plots(rows, out_dir, predicted=None):
    """Writes every plot into out_dir; returns [{"title", "png", "svg", "predicted"}] (paths relative to
    the report; predicted: the "model mode" curves of predictions drawn on it).

    predicted: {(model, mode): [{"nodes", "throughput_samples_per_s", "time_per_epoch_s", "speedup",
    "efficiency"}]} from report_prediction.predicted_curves, or None."""
    predicted = predicted or {}
    os.makedirs(out_dir, exist_ok=True)
    plotted = [r for r in rows if r["runs_used"] > 0]
    if not plotted:
        return []
    made = [line_figure(plotted, out_dir, "throughput", "Throughput against nodes (median over repeats; "
                        "dotted: ideal)", plot_throughput, predicted),
            line_figure(plotted, out_dir, "speedup", "Speedup against the smallest node count (strong: "
                        "T(base)/T(N) per epoch; weak: throughput ratio)", plot_speedup, predicted),
            line_figure(plotted, out_dir, "efficiency", "Parallel efficiency against nodes", plot_efficiency,
                        predicted),
            line_figure(plotted, out_dir, "time_per_epoch", "Time per epoch against nodes (median over repeats)",
                        plot_time_per_epoch, predicted)]
    for model in models_of(plotted):
        if any(r["step_s"] is not None for r in plotted if r["model"] == model):
            made.append(split_figure(plotted, out_dir, model))
    return made
