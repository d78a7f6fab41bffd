#!/usr/bin/env python3
"""same_records_ab.py RUN_A RUN_B: two runs of the same configuration by two builds (tools/same_bits_ab.sh)
say the same in their MLPerf logs and reports: mllog.txt has the same keys, values and metadata in the
same order (times and source line numbers aside), and report.json has the same fields, with the same
values where a value does not depend on time (the run's position, epochs and results, checkpoints)."""
import json
import sys


def log_lines(run):
    lines = []
    with open(f"{run}/mllog.txt") as f:
        for line in f:
            j = json.loads(line.split(":::MLLOG ", 1)[1])
            j.pop("time_ms", None)
            j.get("metadata", {}).pop("lineno", None)
            lines.append(j)
    return lines


def paths(value, prefix=""):
    """Every key path of a JSON value (lists by their first element's)."""
    if isinstance(value, dict):
        out = {prefix}
        for k, v in value.items():
            out |= paths(v, f"{prefix}.{k}")
        return out
    if isinstance(value, list) and value:
        return {prefix} | paths(value[0], prefix + "[]")
    return {prefix}


TIMELESS = ["status", "model", "task", "quality_metric", "parameters", "global_batch_size", "steps", "samples_trained",
            "steps_per_epoch", "final_val_accuracy", "target_accuracy", "optimizer_options", "allreduce_bytes_per_step"]
EPOCH_TIMELESS = ["epoch", "steps", "train_loss", "val_accuracy", "val_loss", "val_metrics"]


def main(a, b):
    problems = []
    la, lb = log_lines(a), log_lines(b)
    if la != lb:
        first = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), min(len(la), len(lb)))
        problems.append(f"mllog.txt differs from line {first + 1} ({len(la)} and {len(lb)} lines): "
                        f"{la[first] if first < len(la) else None} / {lb[first] if first < len(lb) else None}")
    ra, rb = (json.load(open(f"{r}/report.json")) for r in (a, b))
    pa, pb = paths(ra), paths(rb)
    if pa != pb:
        problems.append(f"report.json fields differ: only in A {sorted(pa - pb)}, only in B {sorted(pb - pa)}")
    for key in TIMELESS:
        if ra.get(key) != rb.get(key):
            problems.append(f"report.json {key}: {ra.get(key)} / {rb.get(key)}")
    for ea, eb in zip(ra["epochs"], rb["epochs"]):
        for key in EPOCH_TIMELESS:
            if ea.get(key) != eb.get(key):
                problems.append(f"report.json epoch {ea.get('epoch')} {key}: {ea.get(key)} / {eb.get(key)}")
    if len(ra["epochs"]) != len(rb["epochs"]):
        problems.append(f"report.json has {len(ra['epochs'])} and {len(rb['epochs'])} epochs")
    for key in ["written", "bytes"]:
        if ra["checkpoints"][key] != rb["checkpoints"][key]:
            problems.append(f"report.json checkpoints.{key}: {ra['checkpoints'][key]} / {rb['checkpoints'][key]}")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
