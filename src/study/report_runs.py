"""Reading a study directory: study.json, each run's report.json and mllog.txt.

Every run listed in study.json becomes one record, whatever happened to it: "ok" (its numbers are
used), "missing" (no report.json) or "failed" (a report.json that says it did not finish, or an
MLPerf log whose run_stop says aborted). Nothing is dropped silently; the report lists the reasons.
Numbers that newer report.json files carry (time_per_epoch_s, step_split, step_time) are derived
from older keys where they can be, and the record says which source each came from.
"""

import json
import os
import re

STUDY_FORMAT = 1
# report.json statuses of a run that trained what it was asked to (docs/report.md).
FINISHED_STATUSES = ("completed", "target_reached", "max_steps")
REQUIRED_RUN_KEYS = ("id", "model", "mode", "nodes", "ranks", "global_batch", "batch_per_rank", "repeat")
COUNT_KEYS = ("nodes", "ranks", "global_batch", "batch_per_rank", "repeat", "accumulate_steps")
MLLOG_PREFIX = ":::MLLOG "


class ReportError(Exception):
    """An error the user can fix; exit_code 2 for the command line, 1 for the files it names."""

    def __init__(self, message, exit_code=1):
        super().__init__(message)
        self.exit_code = exit_code


def load_json_file(path, what):
    """Parses a JSON file, naming it (and what it is) in any error."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise ReportError(f"cannot read {what} {path}: {e.strerror}") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ReportError(f"{what} {path} is not valid JSON: {e}") from e


def load_study(study_dir):
    """Returns study.json of STUDY_DIR, checked for the keys the report needs."""
    if not os.path.isdir(study_dir):
        raise ReportError(f"STUDY_DIR '{study_dir}' is not a directory", exit_code=2)
    path = os.path.join(study_dir, "study.json")
    if not os.path.isfile(path):
        raise ReportError(
            f"{path} not found: '{study_dir}' is not a study directory. Submit a study first with "
            "`scaletrain-study submit STUDY` (or `jobscripts/study.sh submit STUDY`); it writes study.json "
            "and the run directories this command reads")
    study = load_json_file(path, "study manifest")
    check_study(study, path)
    return study


def check_study(study, path):
    if not isinstance(study, dict):
        raise ReportError(f"{path}: expected a JSON object, found {type(study).__name__}")
    if study.get("format") != STUDY_FORMAT:
        raise ReportError(f"{path}: \"format\" is {study.get('format')!r}; this tool reads format {STUDY_FORMAT}")
    runs = study.get("runs")
    if not isinstance(runs, list):
        raise ReportError(f"{path}: \"runs\" is missing or not a list")
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            raise ReportError(f"{path}: runs[{i}] is not an object")
        missing = [k for k in REQUIRED_RUN_KEYS if k not in run]
        if missing:
            raise ReportError(f"{path}: runs[{i}] ({run.get('id', 'no id')}) lacks {', '.join(missing)}")
        for key in COUNT_KEYS:
            value = run.get(key, 1)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ReportError(f"{path}: runs[{i}] ({run['id']}): \"{key}\" is {value!r}, expected a "
                                  "positive integer")


def resolve_run_dir(study_dir, run):
    """The run's directory: output_dir as submitted, else STUDY_DIR/<id> (a study copied elsewhere)."""
    candidates = [run.get("output_dir"), os.path.join(study_dir, run["id"])]
    for c in candidates:
        if c and os.path.isdir(c):
            return c
    return candidates[1]


def parse_mllog(path):
    """The run_start/run_stop events of an MLPerf log, or None when there is no log.

    Returns {"run_start_ms", "run_stop_ms", "status", "bad_lines"}; the first run_start and the
    last run_stop count (one MLPerf run, whatever the number of job segments)."""
    if not os.path.isfile(path):
        return None
    found = {"run_start_ms": None, "run_stop_ms": None, "status": None, "bad_lines": 0}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.startswith(MLLOG_PREFIX):
                continue
            try:
                event = json.loads(line[len(MLLOG_PREFIX):])
                note_mllog_event(found, event)
            except (json.JSONDecodeError, TypeError, AttributeError, KeyError):
                found["bad_lines"] += 1
    return found


def note_mllog_event(found, event):
    key = event["key"]
    if key == "run_start" and found["run_start_ms"] is None:
        found["run_start_ms"] = float(event["time_ms"])
    elif key == "run_stop":
        found["run_stop_ms"] = float(event["time_ms"])
        found["status"] = (event.get("metadata") or {}).get("status")


def run_point(run):
    """The run's point in its series, as its id names it: nN (N whole nodes) or gG (G GPUs of one
    node, a series' runs inside one node)."""
    match = re.search(r"-([ng]\d+)-r\d+$", str(run["id"]))
    return match.group(1) if match else f"n{int(run['nodes'])}"


def new_record(run, run_dir):
    # "model" is the series the run belongs to (its name in study.json, which is the model's own name
    # in a study without [series] sections): the report groups and labels by it. "model_name" is
    # scaletrain's model, which the run's report.json and the predictions name.
    return {
        "id": run["id"], "model": run.get("series") or run["model"], "model_name": run["model"],
        "point": run_point(run), "mode": run["mode"], "nodes": int(run["nodes"]),
        "ranks": int(run["ranks"]), "ranks_per_node": run.get("ranks_per_node"),
        "global_batch": int(run["global_batch"]), "batch_per_rank": int(run["batch_per_rank"]),
        "accumulate_steps": int(run.get("accumulate_steps") or 1), "repeat": int(run["repeat"]),
        # What the run's batches and throughput count: "tokens" for a translation model (study.json's
        # batch_unit, then its report.json's throughput.unit), else "samples".
        "unit": "tokens" if run.get("batch_unit") == "tokens" else "samples",
        "job_id": run.get("job_id"), "dir": run_dir, "state": "ok", "reasons": [], "notes": [],
        "converged": None, "metrics": None, "per_rank_step_time": None, "hosts": None,
    }


def read_run(study_dir, run):
    """One run's record: its state, the reasons for it, and its numbers when it finished."""
    run_dir = resolve_run_dir(study_dir, run)
    rec = new_record(run, run_dir)
    report_path = os.path.join(run_dir, "report.json")
    if not os.path.isdir(run_dir):
        return mark(rec, "missing", f"no run directory {run_dir} (the job did not start; see the Slurm "
                                    "output in STUDY_DIR/logs)")
    if not os.path.isfile(report_path):
        return mark(rec, "missing", f"no report.json in {run_dir} (the job failed or was cancelled before "
                                    "its first report, or has not run yet)")
    try:
        report = load_json_file(report_path, "run report")
    except ReportError as e:
        return mark(rec, "failed", str(e))
    mllog = parse_mllog(os.path.join(run_dir, "mllog.txt"))
    classify(rec, report, mllog)
    if rec["state"] == "ok":
        try:
            fill_metrics(rec, report, mllog)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
            return mark(rec, "failed", f"{report_path} lacks or has a bad throughput/world_size ({e!r})")
        check_against_study(rec, report)
    return rec


def mark(rec, state, reason):
    rec["state"] = state
    rec["reasons"].append(reason)
    return rec


def classify(rec, report, mllog):
    """Sets the run's state from report.json's status and mllog.txt's run_stop."""
    status = report.get("status")
    if status not in FINISHED_STATUSES:
        mark(rec, "failed", f"report.json status '{status}' (finished runs say "
                            f"{', '.join(FINISHED_STATUSES)}; 'interrupted' resumes when resubmitted)")
        return
    target = report.get("target_accuracy")
    if mllog is None:
        rec["notes"].append("no mllog.txt" + (": time to target taken from report.json" if target else ""))
    elif mllog["run_stop_ms"] is None:
        rec["notes"].append("mllog.txt has no run_stop line")
    elif mllog["status"] == "aborted":
        if target and status != "target_reached":
            # Trained what it was asked (all epochs, or up to --max-steps) without reaching the target:
            # its speed is a valid measurement; for the MLPerf score it is a non-converged run.
            rec["reasons"].append(f"did not reach target accuracy {target} (mllog run_stop status aborted, "
                                  f"final val accuracy {report.get('final_val_accuracy')})")
        else:
            mark(rec, "failed", "mllog.txt run_stop status 'aborted'")
            return
    if mllog is not None and mllog["bad_lines"]:
        rec["notes"].append(f"mllog.txt: {mllog['bad_lines']} :::MLLOG lines are not valid JSON (skipped)")
    if target:
        rec["converged"] = converged(report, mllog)


def converged(report, mllog):
    if mllog is not None and mllog["run_stop_ms"] is not None:
        return mllog["status"] == "success"
    return report.get("time_to_target_s") is not None


def fill_metrics(rec, report, mllog):
    ranks = int(report.get("world_size") or rec["ranks"])
    throughput = float(report["throughput"]["samples_per_s"])
    tpe, tpe_source = time_per_epoch(report)
    split, split_source = step_split(report)
    # A translation run counts tokens (report.json throughput.unit and tokens_per_s); its samples are sentence pairs.
    if report["throughput"].get("unit") == "tokens":
        rec["unit"] = "tokens"
    tokens = {}
    if rec["unit"] == "tokens":
        value = report["throughput"].get("tokens_per_s")
        if value is None:
            raise KeyError("throughput.tokens_per_s (study.json says the run's batches count tokens)")
        tokens = {"throughput_tokens_per_s": float(value), "throughput_per_rank_tokens_per_s": float(value) / ranks}
    rec["metrics"] = {
        "throughput_samples_per_s": throughput,
        "throughput_per_rank_samples_per_s": throughput / ranks, **tokens,
        "time_per_epoch_s": tpe, "time_per_epoch_source": tpe_source,
        "step_split": split, "step_split_source": split_source,
        # Gradient bytes each rank all-reduces per step: NCF's embeddings against ResNet's convolutions.
        "allreduce_mb_per_step": (report["allreduce_bytes_per_step"] / 1e6
                                  if report.get("allreduce_bytes_per_step") is not None else None),
        "time_to_target_s": time_to_target(report, mllog, rec["converged"]),
        "steps": report.get("steps"), "train_time_s": report.get("train_time_s"),
        "final_val_accuracy": report.get("final_val_accuracy"),
    }
    step_time = report.get("step_time")
    if isinstance(step_time, dict) and step_time.get("per_rank"):
        rec["per_rank_step_time"] = step_time["per_rank"]
    rec["hosts"] = report.get("hosts")


def time_per_epoch(report):
    """Seconds of training per epoch: the report's own figure, else derived from the step rate."""
    if report.get("time_per_epoch_s") is not None:
        return float(report["time_per_epoch_s"]), "report.json time_per_epoch_s"
    steps, per_epoch, train_time = report.get("steps"), report.get("steps_per_epoch"), report.get("train_time_s")
    if steps and per_epoch and train_time is not None:
        return float(train_time) * per_epoch / steps, "train_time_s x steps_per_epoch / steps"
    return None, "not recorded"


def segment_steps(report):
    """Optimizer steps of the segment that wrote the report (phases are totals over it)."""
    segments = report.get("segments") or []
    if segments:
        s = segments[-1]
        if s.get("last_step") is not None and s.get("first_step") is not None:
            return s["last_step"] - s["first_step"], s.get("train_time_s")
    return (report.get("data") or {}).get("steps"), None


def step_split(report):
    """Per optimizer step: {step_s, compute_s, exposed_comm_s, data_wait_s}, and where it came from."""
    split = report.get("step_split")
    if isinstance(split, dict) and split.get("step_s") is not None:
        keys = ("step_s", "compute_s", "exposed_comm_s", "data_wait_s")
        return {k: float(split[k]) if split.get(k) is not None else None for k in keys}, "report.json step_split"
    phases = report.get("phases") or {}
    steps, seg_train_time = segment_steps(report)
    try:
        per_step = {p: phases[p]["mean_s"] / steps for p in ("data_wait", "forward", "backward", "allreduce",
                                                              "optimizer")}
    except (KeyError, TypeError, ZeroDivisionError):
        return None, "not recorded"
    step_s = seg_train_time / steps if seg_train_time else None
    return {"step_s": step_s,
            "compute_s": per_step["forward"] + per_step["backward"] + per_step["optimizer"],
            "exposed_comm_s": per_step["allreduce"], "data_wait_s": per_step["data_wait"]}, \
        "report.json phases (mean over ranks) / steps of the segment"


def time_to_target(report, mllog, did_converge):
    """MLPerf time to train in seconds: run_stop - run_start of a successful run with a target."""
    if not did_converge:
        return None
    if mllog is not None and mllog["run_start_ms"] is not None and mllog["run_stop_ms"] is not None:
        return (mllog["run_stop_ms"] - mllog["run_start_ms"]) / 1000.0
    value = report.get("time_to_target_s")
    return float(value) if value is not None else None


def check_against_study(rec, report):
    """Notes where the run's own report disagrees with what the study asked for."""
    pairs = [("model", rec["model_name"], report.get("model")),
             ("ranks", rec["ranks"], report.get("world_size")),
             ("global batch", rec["global_batch"], report.get("global_batch_size"))]
    if report.get("accumulate_steps") is not None:
        pairs.append(("accumulate steps", rec["accumulate_steps"], report.get("accumulate_steps")))
    for what, asked, got in pairs:
        if got is not None and got != asked:
            rec["notes"].append(f"study.json asked for {what} {asked}, report.json says {got}")


def read_runs(study_dir, study):
    return [read_run(study_dir, run) for run in study["runs"]]

