#!/usr/bin/python3
"""scaletrain-report: the tables, plots, straggler list and merged traces of a scaling study.

  scaletrain-report STUDY_DIR [--straggler-margin 0.10] [--prediction FILE]... [--output DIR]
  scaletrain-report trace RUN_DIR [--output FILE]

The first form reads STUDY_DIR/study.json (written by `scaletrain-study submit`) and every run's
report.json and mllog.txt, and writes into STUDY_DIR/report/ (or --output): scaling.md,
scaling.csv, scaling.json, plots/*.png and plots/*.svg, and trace-<run>.json for runs that
recorded traces. Each --prediction (`scaletrain-advisor predict --json`; its calibration names
the model) is set beside the measurement: predicted columns and errors in the tables, dashed
curves on the plots. The second merges one run's per-rank traces into RUN_DIR/trace.json.
Exit status: 0 done (missing or failed runs are listed in the report, not an error), 1 a file
it needs is missing or unreadable, 2 a command-line error.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from report_prediction import (ERROR_TARGET, compare_rows, load_predictions, predicted_curves,  # noqa: E402
                               prediction_summary, study_train_samples)
from report_runs import ReportError, load_study, read_runs  # noqa: E402
from report_scoring import build_rows, comparison  # noqa: E402
from report_stragglers import find_stragglers  # noqa: E402
from report_tables import (csv_text, generated_time, json_text, markdown_text,  # noqa: E402
                           write_atomically)
from report_trace import merge_run_traces, rank_files  # noqa: E402

PROG = "scaletrain-report"
REPORT_FORMAT = 1
STATISTICS = ("Over the repeats of a point: throughput and time per epoch are medians, with min and max; the "
              "step-time split is the mean; time to target is scored as the MLPerf rules say (see its section). "
              "Speedup and efficiency are against the smallest node count of the series with a finished run; "
              "efficiency divides the speedup by the growth in ranks.")


class Parser(argparse.ArgumentParser):
    """argparse that reports errors as `scaletrain-report: error: ...` with exit status 2."""

    def error(self, message):
        raise ReportError(f"{message} (see `{PROG} --help`)", exit_code=2)


def margin_value(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--straggler-margin '{text}' is not a number") from None
    if not 0 < value < 10:
        raise argparse.ArgumentTypeError(f"--straggler-margin {text} must be above 0 and below 10 "
                                         "(a fraction: 0.10 flags ranks 10% slower than the median)")
    return value


USAGE = f"""{PROG} STUDY_DIR [--straggler-margin F] [--prediction FILE]... [--output DIR]
       {PROG} trace RUN_DIR [--output FILE]"""
DESCRIPTION = """\
Reads STUDY_DIR/study.json (written by `scaletrain-study submit`) and every run's report.json and
mllog.txt, and writes into STUDY_DIR/report/:
  scaling.md, scaling.csv   one row per (model, mode, node count): nodes, ranks, global batch,
                            batch per rank, throughput, time per epoch, speedup, efficiency,
                            time to target (MLPerf scoring), step-time split, min/max over repeats
  scaling.json              the same, plus every run's state, the missing and failed runs,
                            the stragglers and the models side by side
  plots/*.png, plots/*.svg  throughput, speedup, efficiency, time per epoch, step-time split
  trace-<run>.json          merged per-rank timelines of runs trained with --trace
With --prediction FILE (`scaletrain-advisor predict --json`, repeatable), the tables get the
predicted step time and throughput and their error against each measured point, and the plots
a dashed "predicted" line beside each measured curve.
Missing and failed runs are listed in the report, not an error. `trace RUN_DIR` merges one run's
RUN_DIR/trace/rank-*.json into RUN_DIR/trace.json.
Exit status: 0 report written, 1 a file it needs is missing or unreadable, 2 bad command line."""


def study_parser():
    p = Parser(prog=PROG, usage=USAGE, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
               epilog="docs/scaling-studies.md explains every number.")
    p.add_argument("study_dir", metavar="STUDY_DIR", help="the study directory (holds study.json)")
    p.add_argument("--straggler-margin", type=margin_value, default=0.10, metavar="F",
                   help="flag ranks whose p50 step time is more than this fraction above the run's median "
                        "(default 0.10)")
    p.add_argument("--prediction", action="append", default=[], metavar="FILE",
                   help="a prediction of `scaletrain-advisor predict --json` to set beside the measurement "
                        "(its calibration names the model); repeat it for more models, or for a model's strong "
                        "and weak series when their batches differ")
    p.add_argument("--output", metavar="DIR", help="where to write the report (default STUDY_DIR/report)")
    return p


def trace_parser():
    p = Parser(prog=f"{PROG} trace", description="Merge RUN_DIR/trace/rank-*.json (written by "
               "`scaletrain train --trace`) into one Chrome trace for Perfetto or chrome://tracing.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (holds trace/rank-NNNNN.json)")
    p.add_argument("--output", metavar="FILE", help="the merged file (default RUN_DIR/trace.json)")
    return p


def run_trace(argv):
    args = trace_parser().parse_args(argv)
    if not os.path.isdir(args.run_dir):
        raise ReportError(f"RUN_DIR '{args.run_dir}' is not a directory", exit_code=2)
    out = args.output or os.path.join(args.run_dir, "trace.json")
    result = merge_run_traces(args.run_dir, out)
    print(f"{PROG}: merged {result['ranks']} rank trace(s), {result['events']} events, into {out}")
    return 0


def trace_name(rec):
    return f"trace-{rec['model']}-{rec['mode']}-{rec.get('point') or 'n' + str(rec['nodes'])}-r{rec['repeat']}.json"


def merge_study_traces(records, out_dir, warnings):
    """Merges the traces of every run that has them; a bad trace is a warning, not a failed report."""
    traces = []
    for rec in records:
        if not os.path.isdir(rec["dir"]) or not rank_files(rec["dir"]):
            continue
        try:
            result = merge_run_traces(rec["dir"], os.path.join(out_dir, trace_name(rec)))
            traces.append({"run": rec["id"], **result})
        except ReportError as e:
            warnings.append(f"trace of {rec['id']} not merged: {e}")
            traces.append({"run": rec["id"], "error": str(e)})
    return traces


def plots_or_reason(rows, out_dir, warnings, predicted):
    try:
        from report_plots import make_plots
    except ImportError as e:
        reason = (f"plots not made: matplotlib cannot be imported ({e}); install python3-matplotlib "
                  "(`make deps`) and run the report again")
        warnings.append(reason)
        return reason
    return make_plots(rows, os.path.join(out_dir, "plots"), predicted)


def counts(records):
    return {"planned": len(records), "used": sum(r["state"] == "ok" for r in records),
            "missing": sum(r["state"] == "missing" for r in records),
            "failed": sum(r["state"] == "failed" for r in records),
            "not_converged": sum(r["state"] == "ok" and r["converged"] is False for r in records)}


def run_summary(rec):
    """A run as scaling.json lists it (without the bulky per-rank list)."""
    return {k: v for k, v in rec.items() if k not in ("per_rank_step_time",)}


def study_models(records):
    return list(dict.fromkeys(r["model"] for r in records))


def build_report(study_dir, study, records, margin, out_dir, predictions):
    rows = build_rows(records)
    compare_rows(rows, predictions)
    warnings = []
    curves = predicted_curves(rows, predictions, study_train_samples(study), warnings)
    report = {
        "format": REPORT_FORMAT, "study": study.get("name") or os.path.basename(os.path.abspath(study_dir)),
        "study_dir": os.path.abspath(study_dir), "generated": generated_time(), "generated_unix": time.time(),
        "parameters": study.get("parameters"), "statistics": STATISTICS, "counts": counts(records),
        "rows": rows, "comparison": comparison(rows),
        "missing_failed": [{"id": r["id"], "state": r["state"], "reasons": r["reasons"], "dir": r["dir"],
                            "job_id": r["job_id"]} for r in records if r["state"] != "ok"],
        "not_converged": [{"id": r["id"], "reasons": r["reasons"]}
                          for r in records if r["state"] == "ok" and r["converged"] is False],
        "stragglers": find_stragglers(records, margin),
        "traces": merge_study_traces(records, out_dir, warnings),
        "predictions": [prediction_summary(p, curves) for p in predictions],
        "prediction_error_target": ERROR_TARGET,
        "runs": [run_summary(r) for r in records], "warnings": warnings,
    }
    report["plots"] = plots_or_reason(rows, out_dir, warnings, {k: c["points"] for k, c in curves.items()})
    return report


def run_study(argv):
    args = study_parser().parse_args(argv)
    study = load_study(args.study_dir)
    records = read_runs(args.study_dir, study)
    # Read before anything is written: a prediction for the wrong model is an error, not a warning.
    predictions = load_predictions(args.prediction, study_models(records))
    out_dir = args.output or os.path.join(args.study_dir, "report")
    os.makedirs(out_dir, exist_ok=True)
    report = build_report(args.study_dir, study, records, args.straggler_margin, out_dir, predictions)
    write_atomically(os.path.join(out_dir, "scaling.csv"), csv_text(report["rows"]))
    write_atomically(os.path.join(out_dir, "scaling.json"), json_text(report))
    write_atomically(os.path.join(out_dir, "scaling.md"), markdown_text(report, records))
    print_summary(report, out_dir)
    return 0


def print_summary(report, out_dir):
    c = report["counts"]
    print(f"{PROG}: {c['planned']} runs: {c['used']} used, {c['missing']} missing, {c['failed']} failed")
    for bad in report["missing_failed"]:
        print(f"  {bad['state']}: {bad['id']}: {'; '.join(bad['reasons'])}")
    for w in report["warnings"]:
        print(f"{PROG}: warning: {w}", file=sys.stderr)
    if report["predictions"]:
        limit = report["prediction_error_target"] * 100
        errors = [[abs(e) for e in (r["step_error_pct"], r["throughput_error_pct"]) if e is not None]
                  for r in report["rows"]]
        compared = [e for e in errors if e]
        print(f"  prediction: {len(compared)} point(s) compared, {sum(max(e) > limit for e in compared)} with an "
              f"error above {limit:.0f}%")
    flagged = report["stragglers"]["hosts"]
    if flagged:
        print(f"  straggler hosts: {', '.join(str(h['host']) for h in flagged)}")
    print(f"wrote {os.path.join(out_dir, 'scaling.md')}, scaling.csv, scaling.json"
          + (f" and {len(report['plots'])} plots (PNG and SVG)" if isinstance(report["plots"], list) else ""))


def main(argv):
    try:
        if len(argv) >= 1 and argv[0] == "trace":
            return run_trace(argv[1:])
        return run_study(argv)
    except ReportError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        print(f"{PROG}: error: {e.filename or ''}: {e.strerror}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
