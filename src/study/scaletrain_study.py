#!/usr/bin/python3
"""scaletrain-study: submit a scaling study to Slurm, follow it, resubmit what failed, report it.

A study is the same training run repeated over node counts (and GPU counts of one node): strong
series (fixed global batch) and/or weak series (fixed batch per rank), for one or more models, one
or more series each. Each run is one Slurm job of jobscripts/train.sbatch writing into
STUDY_DIR/<series>/<mode>-n<nodes>-r<repeat>/ (or -g<gpus>- inside one node; the series is the
model without [series] sections); a last job
(jobscripts/study-report.sbatch) waits for all of them and runs scaletrain-report STUDY_DIR.
study.json in STUDY_DIR records the parameters, every run, its job ids and its sbatch line.
Standard library only, so that it runs with any Python 3 on a login node.
"""

import argparse
import configparser
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAIN_JOB = REPO / "jobscripts" / "train.sbatch"
REPORT_JOB = REPO / "jobscripts" / "study-report.sbatch"
REPORT_TOOL = REPO / "src" / "study" / "scaletrain_report.py"
MANIFEST = "study.json"
MANIFEST_FORMAT = 1

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad input from the user (study file, options, values): exit code 2."""


class Failure(Exception):
    """Something outside the user's input went wrong (sbatch failed, files unreadable): exit code 1."""


# ---------------------------------------------------------------------------------------------
# Study parameters: one table drives the study file, the command-line options and --help.
# ---------------------------------------------------------------------------------------------

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# Slurm's --time formats: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds.
SLURM_TIME_RE = re.compile(r"^(?:(\d+)-(\d+)(?::(\d+)(?::(\d+))?)?|(\d+)(?::(\d+)(?::(\d+))?)?)$")


def parse_name(text):
    if not NAME_RE.match(text):
        raise ValueError("use letters, digits, '.', '_' and '-' (it names Slurm jobs and directories)")
    return text


def parse_positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise ValueError("not an integer") from None
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def parse_non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise ValueError("not an integer") from None
    if value < 0:
        raise ValueError("must not be negative")
    return value


def parse_positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise ValueError("not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError("must be a positive number")
    return value


def parse_non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        raise ValueError("not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError("must be a number >= 0")
    return value


def parse_accuracy(text):
    """The model's quality target: a fraction in (0, 1] (top-1, HR@10), or BLEU up to 100 for a
    translation model (checked per model once its task is known: check_batches)."""
    value = parse_positive_float(text)
    if value > 100:
        raise ValueError("top-1 accuracy is a fraction in (0, 1], e.g. 0.759; a translation model's BLEU is at "
                         "most 100")
    return value


def parse_bool(text):
    lowered = text.strip().lower()
    if lowered in ("1", "yes", "true", "on"):
        return True
    if lowered in ("0", "no", "false", "off"):
        return False
    raise ValueError("not a boolean (yes/no, true/false, 1/0)")


def parse_mode(text):
    lowered = text.strip().lower()
    if lowered == "both":
        return ["strong", "weak"]
    modes = [m.strip() for m in lowered.split(",") if m.strip()]
    if not modes or any(m not in ("strong", "weak") for m in modes) or len(set(modes)) != len(modes):
        raise ValueError("the mode is strong, weak or both")
    return [m for m in ("strong", "weak") if m in modes]


def parse_counts(text, what):
    """"1,2,4,8" or ranges "1-4,8": a sorted list of distinct positive counts; "none" is no count (a
    series that sets it has no runs of that kind, whatever [study] says)."""
    if text.strip().lower() == "none":
        return []
    counts = []
    for item in text.replace(" ", "").split(","):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", item)
        if not match:
            raise ValueError(f"'{item}' is not a {what} count; write e.g. 1,2,4,8 or 1-4,8")
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        if first < 1 or last < first:
            raise ValueError(f"'{item}': {what} counts are positive and ranges ascend")
        counts.extend(range(first, last + 1))
    duplicates = sorted({n for n in counts if counts.count(n) > 1})
    if duplicates:
        raise ValueError(f"{what} count {duplicates[0]} appears twice")
    return sorted(counts)


def parse_nodes(text):
    return parse_counts(text, "node")


def parse_gpus(text):
    return parse_counts(text, "GPU")


GPU_REQUESTS = ("no", "gpus-per-node", "gres")


def parse_gpu_request(text):
    lowered = text.strip().lower()
    if lowered not in GPU_REQUESTS:
        raise ValueError("use no (the default: GPUs come from sbatch-options, if any), gpus-per-node or gres")
    return lowered


def parse_lr_rule(text):
    lowered = text.strip().lower()
    if lowered not in ("none", "linear"):
        raise ValueError("the rule is none or linear")
    return lowered


DATA_CHECKS = ("require", "verify", "none")


def parse_data_checks(text):
    lowered = text.strip().lower()
    if lowered not in DATA_CHECKS:
        raise ValueError("use require (the default), verify or none")
    return lowered


def parse_slurm_time(text):
    if not SLURM_TIME_RE.match(text.strip()):
        raise ValueError("not a Slurm time limit (minutes, HH:MM:SS, D-HH:MM:SS ...)")
    return text.strip()


def parse_words(text):
    try:
        return shlex.split(text)
    except ValueError as error:
        raise ValueError(f"cannot split it into options like a shell would: {error}") from None


def parse_text(text):
    if not text.strip():
        raise ValueError("empty")
    return text.strip()


# Paths are parsed later (they are relative to the study file or the working directory).
PATH = "path"

# A series' batches count samples, or tokens for a translation model (scaletrain train --batch-tokens):
# each unit has its own keys, so that a study of several models can give both in [study].
TRANSLATION = "translation"
BATCH_KEYS = {
    "samples": {"global": "global-batch", "per-rank": "batch-per-rank", "reference": "reference-batch"},
    "tokens": {"global": "global-batch-tokens", "per-rank": "batch-tokens-per-rank",
               "reference": "reference-batch-tokens"},
}
KEY_UNIT = {key: unit for unit, keys in BATCH_KEYS.items() for key in keys.values()}
KEY_UNIT["max-batch-per-rank"] = "samples"  # the trainer does not accumulate token batches
SAME_IN_OTHER_UNIT = {BATCH_KEYS["samples"][k]: BATCH_KEYS["tokens"][k] for k in BATCH_KEYS["samples"]}
SAME_IN_OTHER_UNIT.update({v: k for k, v in SAME_IN_OTHER_UNIT.items()})


class Param:
    """One study parameter: its key (study file and option name), parser, where it may be set
    (the [study] section and options, and/or a [model NAME] section) and its help."""

    def __init__(self, key, parser, help_text, in_model=False, in_study=True, metavar=None, in_series=None):
        self.key, self.parser, self.help = key, parser, help_text
        self.in_model, self.in_study = in_model, in_study
        # A [series NAME] section takes what a [model NAME] section takes, and its model.
        self.in_series = in_model if in_series is None else in_series
        self.metavar = metavar or key.upper().replace("-", "_")


PARAMS = [
    Param("name", parse_name, "study name, used in Slurm job names (default: the study file's name "
          "without .ini, else the output directory's name)"),
    Param("output", PATH, "STUDY_DIR: the study's base output directory (required); one directory per run "
          "below it, study.json, logs/ and report/", metavar="STUDY_DIR"),
    Param("mode", parse_mode, "strong, weak or both (default both)", in_model=True),
    Param("nodes", parse_nodes, "node counts, e.g. 1,2,4,8,16,32,64,80 (ranges like 1-4 allowed); each run on N "
          "nodes has ranks-per-node ranks on each (nodes or gpus is required)", in_model=True),
    Param("gpus", parse_gpus, "runs inside one node: GPU counts, e.g. 1,2,4,8, each a run on 1 node with that many "
          "ranks (one per GPU), at most ranks-per-node; run ids MODE-gG-rR (nodes or gpus is required)",
          in_model=True),
    Param("ranks-per-node", parse_positive_int, "MPI ranks per node of the runs on whole nodes: one per GPU, 8 on a "
          "DGX-1, and the most gpus may ask (required)", in_model=True),
    Param("request-gpus", parse_gpu_request, "no (default): the runs ask Slurm for no GPUs themselves (give "
          "--gpus-per-node=8 in sbatch-options where every run has 8 ranks per node) | gpus-per-node | gres: each "
          "run asks for one GPU per rank on its nodes, --gpus-per-node=R or --gres=gpu:R (R its ranks per node)",
          metavar="HOW"),
    Param("global-batch", parse_positive_int, "strong series: the global batch in samples, fixed over node counts; "
          "it must divide by every rank count (required for strong; a translation model's is global-batch-tokens)",
          in_model=True),
    Param("batch-per-rank", parse_positive_int, "weak series: the batch per rank in samples, fixed; global batch = "
          "ranks x this (required for weak; a translation model's is batch-tokens-per-rank)", in_model=True),
    Param("max-batch-per-rank", parse_positive_int, "the largest batch in samples one rank holds in memory; when a "
          "run's batch per rank is larger, the tool sets --accumulate-steps K, the smallest K that divides it into "
          "micro-batches no larger than this (required for strong; not for a translation model, whose token batches "
          "the trainer does not accumulate)", in_model=True),
    Param("global-batch-tokens", parse_positive_int, "strong series of a translation model (transformer ...): the "
          "global batch in tokens, fixed over node counts; each rank gets --batch-tokens global-batch-tokens / ranks, "
          "so it must divide by every rank count (required for a translation model's strong series)", in_model=True,
          metavar="TOKENS"),
    Param("batch-tokens-per-rank", parse_positive_int, "weak series of a translation model: --batch-tokens of every "
          "rank, fixed; global batch = ranks x this tokens (required for a translation model's weak series)",
          in_model=True, metavar="TOKENS"),
    Param("lr-scaling", parse_lr_rule, "learning-rate rule: none (every run uses base-lr, or the model config's "
          "base-lr) | linear (Goyal et al.: lr = base-lr x global batch / reference-batch) (default none)"),
    Param("base-lr", parse_positive_float, "with linear: the learning rate at reference-batch (e.g. 0.1 for "
          "256, required); with none: the learning rate of every run (default: the model config's)",
          in_model=True),
    Param("reference-batch", parse_positive_int, "with linear: the global batch in samples base-lr is for (default "
          "256)", in_model=True),
    Param("reference-batch-tokens", parse_positive_int, "with linear, for a translation model: the global batch in "
          "tokens base-lr is for (required then; e.g. 81920 for NVIDIA's DGX-1 recipe's 1.9e-3)", in_model=True,
          metavar="TOKENS"),
    Param("warmup-epochs", parse_non_negative_float, "linear learning-rate warmup of every run, in epochs "
          "(Goyal et al.: 5; default: the model config's)", in_model=True),
    Param("steps", parse_positive_int, "run length: optimizer steps per run (--max-steps; --epochs is set to "
          "cover them unless epochs is given)"),
    Param("epochs", parse_positive_int, "run length: epochs per run; with target-accuracy, the most epochs"),
    Param("target-accuracy", parse_accuracy, "run length: train to this quality, as MLPerf's time to train, for at "
          "most epochs (default: the model config's epochs): top-1 accuracy (HR@10 for ncf) as a fraction (0..1], or "
          "BLEU (0..100] for a translation model"),
    Param("repeats", parse_positive_int, "runs per (model, mode, node count) (default 1; MLPerf scores "
          "ResNet-50 time to train over 5)"),
    Param("seed", parse_non_negative_int, "seed of repeat 1; repeat r uses seed + r - 1 (default: the model "
          "config's seed, else 0)"),
    Param("chain", parse_bool, "yes: the runs go one after another (each job --dependency=afterany on the "
          "previous), for a small partition or a fair-share budget; no: all are queued at once (default no)"),
    Param("time", parse_slurm_time, "sbatch --time of every run (default: train.sbatch's); keep it above "
          "train.sbatch's checkpoint warning (--signal, 300 s)", in_model=True),
    Param("data-checks", parse_data_checks, "train.sbatch's DATA_CHECKS for every run: require (default: "
          "--require-checksums; the dataset is also checked so at submit, and refused before anything is submitted "
          "when a split has no manifest.json or unchecksummed shards) | verify (also --verify-data: each run hashes "
          "the whole dataset first; a manifest is required at submit) | none (docs/reliability.md)", in_model=True,
          metavar="CHECKS"),
    Param("partition", parse_text, "sbatch --partition of every job"),
    Param("account", parse_text, "sbatch --account of every job"),
    Param("qos", parse_text, "sbatch --qos of every job"),
    Param("constraint", parse_text, "sbatch --constraint of the run jobs (not the report job)"),
    Param("sbatch-options", parse_words, "more sbatch options for the run jobs, shell-quoted, e.g. "
          "'--exclusive --cpus-per-task=5 --gres=gpu:8 --reservation=scaling'", metavar="OPTIONS"),
    Param("train-options", parse_words, "more scaletrain train options for every run, shell-quoted, e.g. "
          "'--eval-every 4 --optimizer lars' (a model's own are appended)", in_model=True, metavar="OPTIONS"),
    Param("report-time", parse_slurm_time, "sbatch --time of the report job (default 00:30:00)"),
    Param("report-sbatch-options", parse_words, "more sbatch options for the report job only (it gets "
          "partition, account and qos, not constraint or sbatch-options)", metavar="OPTIONS"),
    Param("scaletrain", PATH, "the trainer binary (default: $SCALETRAIN, else build/bin/scaletrain of this "
          "repository); scaletrain-data must be beside it", metavar="PATH"),
    Param("model", parse_name, "a series' model: scaletrain's --model (default: the series' name); the series "
          "inherits the [model NAME] section's keys, if there is one", in_study=False, in_series=True),
    Param("config", PATH, "a model's scaletrain config file (INI, e.g. inputs/resnet50_imagenet.ini)",
          in_model=True, in_study=False, metavar="FILE"),
    Param("data", PATH, "a model's dataset directory with train/ and val/ (required per model)",
          in_model=True, in_study=False, metavar="DIR"),
]
PARAM_BY_KEY = {p.key: p for p in PARAMS}

# Options the tool sets itself: given through sbatch-options or train-options they would clash.
OWN_SBATCH_OPTIONS = {
    "--nodes": "nodes", "-N": "nodes", "--ntasks-per-node": "ranks-per-node and gpus",
    "--ntasks": "ranks-per-node and gpus", "-n": "ranks-per-node and gpus", "--job-name": "name", "-J": "name",
    "--output": "output", "-o": "output",
    "--error": "output", "-e": "output", "--export": "(the tool exports DATA, CONFIG, MODEL, OUTPUT_DIR, "
    "SCALETRAIN, DATA_CHECKS)", "--dependency": "chain", "-d": "chain", "--time": "time", "-t": "time",
    "--partition": "partition", "-p": "partition", "--account": "account", "-A": "account",
    "--qos": "qos", "-q": "qos", "--constraint": "constraint", "-C": "constraint",
    "--parsable": "(always given)", "--test-only": "(the tool checks every job with it)",
    "--array": "(one job per run)", "-a": "(one job per run)", "--wrap": "(the job script is train.sbatch)",
}
OWN_TRAIN_OPTIONS = {
    "--model": "[model NAME]", "--config": "config", "--data": "data", "--output-dir": "output",
    "--batch-size": "global-batch / batch-per-rank", "--accumulate-steps": "max-batch-per-rank",
    "--batch-tokens": "global-batch-tokens / batch-tokens-per-rank",
    "--base-lr": "base-lr and lr-scaling", "--warmup-epochs": "warmup-epochs", "--epochs": "epochs",
    "--max-steps": "steps", "--target-accuracy": "target-accuracy", "--seed": "seed",
    "--resume": "(train.sbatch passes --resume auto)", "--overwrite": "(a study never overwrites a run)",
    "--require-checksums": "data-checks", "--verify-data": "data-checks",
}

HELP = f"""\
Submit, follow, resubmit and report a scaling study of scaletrain under Slurm.

commands:
  submit [STUDY_FILE] [options] [--dry-run]
      One sbatch job of jobscripts/train.sbatch per (series, mode, node or GPU count, repeat), then a last
      job (jobscripts/study-report.sbatch) that depends on all of them (--dependency=afterany) and
      runs scaletrain-report STUDY_DIR. Everything is checked before anything is submitted: the
      study file and options, the binaries, each model's config and data (scaletrain-data inspect),
      the strong series' divisibility, and every job with `sbatch --test-only` (the partition,
      account and node counts as Slurm sees them). STUDY_DIR must not hold a study already.
      --dry-run prints the submission as a shell script (every sbatch line shell-quoted, the job
      ids in variables) and submits, creates and writes nothing.
  status STUDY [--json]
      One line per run: run id, job id, Slurm state (squeue; for jobs Slurm no longer knows, the
      run directory's report.json), report.json status, steps done, and the outcome: done,
      pending, running, failed (the job ended without a finished report.json), interrupted
      (checkpointed for a signal and not resumed) or missing (no job and no report).
  resubmit STUDY [--failed | RUN_ID ...] [--dry-run]
      Submits failed, interrupted and missing runs again (--failed), or the runs named (e.g.
      resnet50/strong-n8-r2), with their recorded sbatch line, into the same run directory:
      train.sbatch passes --resume auto, so a run that checkpointed continues and one that did
      not starts afresh. Then a new report job depending on them and on the study's jobs still
      queued. The new job ids are appended to each run's submissions in study.json.
  report STUDY [--prediction FILE]...
      Runs scaletrain-report STUDY_DIR now (src/study/scaletrain_report.py), which writes
      STUDY_DIR/report/: scaling.md, scaling.csv, scaling.json and plots/. Each --prediction
      (scaletrain-advisor predict --json, repeatable) is set beside the measurement.

  STUDY is the study directory, its study.json, or the study file (whose output key names it).

the study file (INI; options given on the command line override it):
  [study]
  name = resnet50-dgx1
  output = /scratch/$USER/studies/resnet50-dgx1
  mode = both
  nodes = 1,2,4,8,16,32,64,80
  ranks-per-node = 8
  global-batch = 5120
  batch-per-rank = 32
  max-batch-per-rank = 128
  lr-scaling = linear
  base-lr = 0.1
  reference-batch = 256
  warmup-epochs = 5
  epochs = 1
  repeats = 3
  time = 00:45:00
  partition = dgx1
  account = myproject

  [model resnet50]
  config = inputs/resnet50_imagenet.ini
  data = /scratch/datasets/imagenet-h5

  One [model NAME] section per model (NAME is scaletrain's --model: resnet50, resnet20, ncf,
  transformer, ...); its runs go to STUDY_DIR/NAME/. A model section needs data and may set config,
  global-batch, batch-per-rank, max-batch-per-rank, base-lr, reference-batch, warmup-epochs, time,
  data-checks and train-options, overriding the [study] values for that model; also mode, nodes,
  gpus and ranks-per-node.

  Batches count samples (images, ratings), except a translation model's (transformer,
  transformer-base, transformer-tiny: the task of its dataset), which count tokens:
  global-batch-tokens (strong), batch-tokens-per-rank (weak) and reference-batch-tokens (linear
  LR) instead of global-batch, batch-per-rank and reference-batch, and no max-batch-per-rank (the
  trainer does not accumulate token batches). In [study] each applies to the models of its unit;
  in a model or series section, or where no model of the study has its unit, a key of the other
  unit is an error.

  Runs inside one node: gpus = 1,2,4,8 adds a run on 1 node with G ranks (one per GPU) for each G
  (at most ranks-per-node; run ids MODE-gG-rR), before the runs on whole nodes of nodes (MODE-nN-rR).
  request-gpus = gpus-per-node (or gres) asks each run for one GPU per rank on its nodes.

  Several series of one model: [series NAME] sections, each with model = MODEL (default NAME) and
  the keys of a model section; a series inherits what it does not set from [model MODEL], if
  present, then from [study]. Its runs go to STUDY_DIR/NAME/. With [series] sections, the study's
  runs are its series and a [model NAME] section holds what its series share.

  Paths may use ~ and $VAR
  (expanded when you submit; other values are passed as written).
  Relative paths are relative to the study file's directory; a config not found there is looked
  up in this repository (so inputs/... works from anywhere). Options' paths are relative to the
  working directory. Comments start with # or ;.

what each run gets:
  sbatch --nodes=N --ntasks-per-node=RANKS_PER_NODE --time=TIME --job-name=NAME-MODEL-MODE-nN-rR
         --output=STUDY_DIR/logs/%x-%j.out [site options]
         --export=ALL,DATA=..,MODEL=..,OUTPUT_DIR=STUDY_DIR/MODEL/MODE-nN-rR,SCALETRAIN=..,
                  DATA_CHECKS=require|verify|none,CONFIG=..
         jobscripts/train.sbatch --batch-size b [--accumulate-steps K] | --batch-tokens T  --base-lr LR
         [--warmup-epochs W] --epochs E [--max-steps S | --target-accuracy A] --seed SEED [train-options]
  strong: ranks = N x RANKS_PER_NODE must divide global-batch G (a node count that does not is
    refused, naming the valid counts near it); per rank G / ranks, split into K micro-batches of
    b = G / (ranks x K) with the smallest K that gives b <= max-batch-per-rank.
  weak: b = batch-per-rank (split the same way when above max-batch-per-rank); G = ranks x b x K.
  a translation model: --batch-tokens T instead of --batch-size b, with T = global-batch-tokens /
    ranks (strong; the ranks must divide it, as above) or T = batch-tokens-per-rank (weak), and
    no accumulation; G = ranks x T tokens.
  LR: with lr-scaling linear, base-lr x G / reference-batch (reference-batch-tokens for a
    translation model; the same for every strong run); with none, base-lr. Recorded per run in
    study.json as base_lr.
  Runs are submitted repeat by repeat (all points of repeat 1 first), so that a chained study
  cut short still has every point once.

options:
  -h, --help   this help; `scaletrain-study COMMAND --help` lists each command's options.

exit status: 0 ok, 2 bad input (nothing submitted), 1 failure (e.g. sbatch failed; what was
submitted is in study.json and `resubmit --failed` completes it).
Paths: repository {REPO}; study files and docs: docs/scaling-studies.md.
"""


# ---------------------------------------------------------------------------------------------
# Reading the study: the file, then the options over it.
# ---------------------------------------------------------------------------------------------

class Setting:
    """A raw value and where it came from, so that errors can name the file, section and key or
    the option, and relative paths resolve against the right directory."""

    def __init__(self, text, origin, base_dir, from_file):
        self.text, self.origin, self.base_dir, self.from_file = text, origin, base_dir, from_file


def expand_path(setting):
    """~ and $VAR in a path, at submission; a variable that is not set is an error, not a directory
    literally named $VAR. (Other values are left alone: the trainer expands $VAR in --stage-to on
    each node, where $TMPDIR and the like mean something.)"""
    expanded = os.path.expanduser(os.path.expandvars(setting.text))
    unset = re.search(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", expanded)
    if unset:
        raise UsageError(f"{setting.origin} = {setting.text!r}: ${unset.group(1)} is not set in the environment")
    return expanded


def read_study_file(path):
    """The [study] settings, a {model name: settings} dict and a {series name: settings} dict from
    an INI study file."""
    if not path.is_file():
        raise UsageError(f"study file {path} does not exist")
    # No interpolation: Slurm options may hold % (e.g. %j); # and ; start comments, also after a value.
    parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=("#", ";"),
                                       empty_lines_in_values=False)
    parser.optionxform = str  # keys as written, so that messages quote them
    try:
        with open(path, encoding="utf-8") as handle:
            parser.read_file(handle)
    except configparser.DuplicateSectionError as error:
        kind = error.section.split()[0] if error.section.split() else ""
        unique = (f": {kind} names are unique (each names a directory of STUDY_DIR)"
                  if kind in ("model", "series") else "")
        raise UsageError(f"study file {path} line {error.lineno}: [{error.section}] appears twice{unique}") from None
    except (configparser.Error, UnicodeDecodeError) as error:
        raise UsageError(f"study file {path}: {error}") from None
    except OSError as error:
        raise UsageError(f"study file {path}: cannot read it: {error.strerror}") from None
    study, models, series = {}, {}, {}
    for section in parser.sections():
        if section == "study":
            target, where = study, "study"
        else:
            match = re.fullmatch(r"(model|series)\s+(\S+)", section)
            if not match:
                raise UsageError(f"study file {path}: unknown section [{section}]; sections are [study], "
                                 f"[model NAME] (one per model) and [series NAME] (several series of a model)")
            where, name = match.group(1), match.group(2)
            if not NAME_RE.match(name):
                raise UsageError(f"study file {path}: [{section}]: {where} name '{name}' must use letters, digits, "
                                 f"'.', '_' and '-'")
            table = models if where == "model" else series
            if name in table:
                raise UsageError(f"study file {path}: [{section}]: {where} {name} appears twice ({where} names are "
                                 f"unique: each names a directory of STUDY_DIR)")
            target = table.setdefault(name, {})
        for key, value in parser.items(section):
            check_key_allowed(key, where, f"study file {path} [{section}]")
            target[key] = Setting(value, f"study file {path} [{section}] {key}", path.parent, True)
    return study, models, series


def check_key_allowed(key, where, origin):
    param = PARAM_BY_KEY.get(key)
    allowed = [p.key for p in PARAMS if {"study": p.in_study, "model": p.in_model, "series": p.in_series}[where]]
    if param is None or key not in allowed:
        hint = ""
        if param is not None:
            hint = {"study": " (it belongs in a [model NAME] or [series NAME] section)",
                    "model": (" (it belongs in [study])" if param.in_study
                              else " (it belongs in a [series NAME] section)"),
                    "series": " (it belongs in [study])"}[where]
        raise UsageError(f"{origin}: unknown key '{key}'{hint}; keys here: {', '.join(allowed)}")


def settings_from_options(args):
    """Study settings given as command-line options (they override the study file)."""
    cwd = Path.cwd()
    study = {}
    for param in PARAMS:
        if not param.in_study:
            continue
        value = getattr(args, param.key.replace("-", "_"), None)
        if value is None:
            continue
        if param.parser is parse_bool:
            value = "yes" if value else "no"
        study[param.key] = Setting(str(value), f"--{param.key}", cwd, False)
    return study


def series_sections(models, series, study_file):
    """[(series name, model name, model settings, series settings, is a [series] section)]: the
    [series NAME] sections with their model's section, or without series sections one series per
    [model NAME] section."""
    if not series:
        return [(name, name, settings, {}, False) for name, settings in models.items()]
    out, used = [], set()
    for name, settings in series.items():
        model = parse_setting("model", settings["model"]) if "model" in settings else name
        used.add(model)
        out.append((name, model, models.get(model, {}), settings, True))
    unused = [m for m in models if m not in used]
    if unused:
        # Most often a misspelt model key: name the series whose model has no section.
        orphans = [f"[series {name}] model = {model!r}" for name, model, settings, _, _ in out
                   if model not in models and "model" in series[name]]
        hint = (f" ({', '.join(orphans)}: no such [model] section; a misspelt model?)" if orphans else "")
        raise UsageError(f"study file {study_file}: [model {unused[0]}] is used by no series{hint}: with "
                         f"[series NAME] sections the study runs its series alone, and a [model NAME] section holds "
                         f"what the series of that model share. Add a [series NAME] with model = {unused[0]}, or "
                         f"remove the section")
    return out


def apply_model_options(args, sections, study_file):
    """--model/--config/--data: --model NAME makes the study that model alone (its series, or its
    file section, if any, are the start); --config and --data set the model's config and data."""
    cwd = Path.cwd()
    given = {k: getattr(args, k) for k in ("config", "data") if getattr(args, k) is not None}
    if args.model is not None:
        if not NAME_RE.match(args.model):
            raise UsageError(f"--model '{args.model}': use letters, digits, '.', '_' and '-'")
        sections = ([s for s in sections if s[1] == args.model] or
                    [(args.model, args.model, {}, {}, False)])
    elif given and len({s[1] for s in sections}) != 1:
        models = list(dict.fromkeys(s[1] for s in sections))
        which = "no model" if not models else f"{len(models)} models ({', '.join(models)})"
        raise UsageError(f"--{next(iter(given))} needs --model NAME: the study has {which}")
    for key, value in given.items():
        for _, _, _, series_settings, _ in sections:  # over the file's model and series sections
            series_settings[key] = Setting(value, f"--{key}", cwd, False)
    if not sections:
        where = f"study file {study_file}" if study_file else "the options"
        raise UsageError(f"no model in {where}: add a [model NAME] section (config, data) or give "
                         f"--model NAME --data DIR [--config FILE]")
    return sections


def parse_setting(key, setting):
    parser = PARAM_BY_KEY[key].parser
    try:
        return parser(setting.text)
    except ValueError as error:
        raise UsageError(f"{setting.origin} = {setting.text!r}: {error}") from None


def resolve_path(setting, search_repo=False):
    path = Path(expand_path(setting))
    if path.is_absolute():
        return path
    candidate = (setting.base_dir / path).resolve()
    if search_repo and setting.from_file and not candidate.exists() and (REPO / path).exists():
        return (REPO / path).resolve()
    return candidate


class Study:
    """The resolved study: typed values, where each came from, and the series (a model each)."""

    def __init__(self, study_file, study_settings, sections):
        self.file = study_file
        self.origin = {k: s.origin for k, s in study_settings.items()}
        self.values = {}
        for key, setting in study_settings.items():
            param = PARAM_BY_KEY[key]
            self.values[key] = resolve_path(setting) if param.parser is PATH else parse_setting(key, setting)
        self.models = [SeriesSpec(*section, self) for section in sections]
        self.check_required()

    def get(self, key, default=None):
        return self.values.get(key, default)

    def where(self, key):
        return self.origin.get(key, f"--{key}")

    @property
    def modes(self):
        return self.values.get("mode", ["strong", "weak"])

    @property
    def name(self):
        if "name" in self.values:
            return self.values["name"]
        stem = self.file.stem if self.file else self.values["output"].name
        return re.sub(r"[^A-Za-z0-9_.-]", "-", stem).lstrip("-._") or "study"

    @property
    def source(self):
        return f"study file {self.file}" if self.file else "the options"

    def check_required(self):
        if "output" not in self.values:
            raise UsageError(f"{self.source}: output is not set (study file key 'output' in [study], or --output)")
        check_path_characters(self.values["output"], self.where("output"))
        length = [k for k in ("steps", "epochs", "target-accuracy") if k in self.values]
        if not length:
            raise UsageError(f"{self.source}: set what each run does: steps, epochs, or target-accuracy (with "
                             f"epochs as the limit)")
        if "steps" in self.values and "target-accuracy" in self.values:
            raise UsageError(f"{self.where('target-accuracy')}: a run stops at steps or at target-accuracy; give one")
        for model in self.models:
            model.check_required(self.source)

    def run_length(self):
        """What study.json records as parameters.run_length."""
        return {k.replace("-", "_"): self.values[k] for k in ("steps", "target-accuracy", "epochs")
                if k in self.values}


class SeriesSpec:
    """One series of the study: its name (its directory), its model, config, data, and the values it
    sets: its [series NAME] section's over its [model NAME] section's over [study]'s. Without
    [series] sections each [model NAME] section is one series named after the model."""

    def __init__(self, name, model, model_settings, series_settings, is_series, study):
        self.name, self.model, self.study = name, model, study
        self.layers = []  # (values, origins), the series' first
        for settings in (series_settings, model_settings):
            values = {}
            for key, setting in settings.items():
                if PARAM_BY_KEY[key].parser is PATH:
                    values[key] = resolve_path(setting, search_repo=(key == "config"))
                else:
                    values[key] = parse_setting(key, setting)
            self.layers.append((values, {k: s.origin for k, s in settings.items()}))
        self.section = f"[series {name}]" if is_series else f"[model {model}]"
        self.config_values = {}
        self.train_samples = None
        # From the dataset (scaletrain-data inspect), which must be of the model's task (the trainer refuses
        # another): translation batches count tokens, every other task's samples.
        self.task = None
        self.train_tokens = None

    @property
    def unit(self):
        """What the series' batches count: "tokens" (a translation model's --batch-tokens) or "samples"."""
        return "tokens" if self.task == TRANSLATION else "samples"

    def batch_key(self, kind):
        """The key of the series' global, per-rank or reference batch in its unit."""
        return BATCH_KEYS[self.unit][kind]

    @property
    def values(self):
        """The series' own and its model section's values (not the study's)."""
        merged = dict(self.layers[1][0])
        merged.update(self.layers[0][0])
        return merged

    def get(self, key, default=None):
        """The series' value, else its model's, else the study's."""
        for values, _ in self.layers:
            if key in values:
                return values[key]
        return self.study.get(key, default)

    def where(self, key):
        for _, origins in self.layers:
            if key in origins:
                return origins[key]
        return self.study.where(key)

    @property
    def modes(self):
        return self.get("mode", ["strong", "weak"])

    def keys_text(self, key):
        """Where a key may be set for this series, for messages."""
        sections = (["[study]"] if PARAM_BY_KEY[key].in_study else []) + [f"[model {self.model}]"] + \
            ([self.section] if self.section.startswith("[series") else [])
        if len(sections) == 1:
            return f"key '{key}' in {sections[0]}, or --{key}"
        return f"key '{key}' in {', '.join(sections[:-1])} or {sections[-1]}, or --{key}"

    def describe(self):
        if self.section.startswith("[series"):
            return f"series {self.name} (model {self.model})"
        return f"model {self.name}"

    def check_required(self, source):
        if "data" not in self.values:
            where = self.keys_text("data").replace("--data", "--data DIR")
            raise UsageError(f"{source}: {self.describe()} has no data ({where})")
        for key in ("data", "config"):
            if key in self.values:
                check_path_characters(self.values[key], self.where(key))
        for key in ("ranks-per-node",):
            if self.get(key) is None:
                raise UsageError(f"{source}: {key} is not set for {self.describe()} ({self.keys_text(key)})")
        if self.get("nodes") is None and self.get("gpus") is None:
            raise UsageError(f"{source}: nodes is not set for {self.describe()}: give nodes (runs on whole nodes) "
                             f"and/or gpus (runs inside one node) ({self.keys_text('nodes')})")
        self.check_gpus()
        if not self.points():
            raise UsageError(f"{source}: {self.describe()} has no runs: its nodes and gpus are both none "
                             f"({self.where('nodes')}, {self.where('gpus')})")
        # The batches (samples or tokens) are checked once the dataset has told the task: check_batches.
        if self.study.get("lr-scaling", "none") == "linear" and self.get("base-lr") is None:
            raise UsageError(f"{source}: base-lr is not set for {self.describe()}; lr-scaling linear needs it "
                             f"({self.keys_text('base-lr')})")

    def check_gpus(self):
        gpus, rpn, nodes = self.get("gpus") or [], self.get("ranks-per-node"), self.get("nodes") or []
        over = [g for g in gpus if g > rpn]
        if over:
            raise UsageError(f"{self.where('gpus')} = {','.join(map(str, gpus))}: {self.describe()} runs inside one "
                             f"node on at most ranks-per-node = {rpn} GPUs ({self.where('ranks-per-node')}); "
                             f"{over[0]} is more: use nodes for runs on several nodes")
        if rpn in gpus and 1 in nodes:
            raise UsageError(f"{self.where('gpus')} = {','.join(map(str, gpus))} and {self.where('nodes')} = "
                             f"{','.join(map(str, nodes))}: {rpn} GPUs of one node and 1 node of {rpn} ranks are the "
                             f"same run of {self.describe()}; drop {rpn} from gpus or 1 from nodes")

    def points(self):
        """(nodes, ranks per node) of each run of a series, by ascending rank count: the runs inside
        one node (gpus), then those on whole nodes."""
        rpn = self.get("ranks-per-node")
        return [(1, g) for g in self.get("gpus") or []] + [(n, rpn) for n in self.get("nodes") or []]

    @property
    def train_options(self):
        return (list(self.study.get("train-options", [])) + list(self.layers[1][0].get("train-options", [])) +
                list(self.layers[0][0].get("train-options", [])))


def check_path_characters(path, origin):
    # Slurm splits --export at commas and expands % in --output: such paths would be mangled.
    for char, why in ((",", "sbatch --export splits at commas"), ("%", "sbatch --output expands %")):
        if char in str(path):
            raise UsageError(f"{origin} = {str(path)!r}: a path with '{char}' cannot be passed to Slurm ({why})")


def load_study(args):
    study_file = Path(args.study_file).resolve() if args.study_file else None
    study_settings, models, series = read_study_file(study_file) if study_file else ({}, {}, {})
    study_settings.update(settings_from_options(args))
    sections = apply_model_options(args, series_sections(models, series, study_file), study_file)
    return Study(study_file, study_settings, sections)


# ---------------------------------------------------------------------------------------------
# Checks of the environment: binaries, configs, datasets, job scripts.
# ---------------------------------------------------------------------------------------------

def trainer_path(study):
    if study.get("scaletrain") is not None:
        return study.get("scaletrain"), study.where("scaletrain")
    if os.environ.get("SCALETRAIN"):
        return Path(os.environ["SCALETRAIN"]).resolve(), "$SCALETRAIN"
    return REPO / "build" / "bin" / "scaletrain", "the default (this repository's build)"


def run_tool(argv, what):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=600)
    except OSError as error:
        raise Failure(f"cannot run {what} ({argv[0]}): {error.strerror}") from None
    except subprocess.TimeoutExpired:
        raise Failure(f"{what} ({shlex.join(argv)}) did not finish in 600 s") from None


def check_trainer(study):
    """The trainer exists and runs; returns its path and the options `scaletrain train --help` lists."""
    path, origin = trainer_path(study)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise UsageError(f"the trainer {path} ({origin}) is not an executable file: build scaletrain (make build) "
                         f"or set scaletrain = PATH / --scaletrain PATH")
    result = run_tool([str(path), "train", "--help"], "scaletrain train --help")
    if result.returncode != 0:
        raise Failure(f"{path} train --help failed (exit {result.returncode}): {result.stderr.strip()[-500:]}")
    options = set(re.findall(r"(--[a-z][a-z0-9-]*)", result.stdout))
    return path, options, trainer_models(path)


def trainer_models(path):
    """The models the trainer knows (`scaletrain info --names`, or an older trainer's `info --json`,
    which builds every model); empty when it cannot say, which leaves the check to the runs."""
    result = run_tool([str(path), "info", "--names"], "scaletrain info --names")
    if result.returncode == 0:
        return set(result.stdout.split())
    result = run_tool([str(path), "info", "--json"], "scaletrain info --json")
    try:
        return {m["model"] for m in json.loads(result.stdout)} if result.returncode == 0 else set()
    except (ValueError, TypeError, KeyError):
        return set()


def check_models(study, trainer, models_known):
    data_tool = trainer.parent / "scaletrain-data"
    if not (data_tool.is_file() and os.access(data_tool, os.X_OK)):
        raise UsageError(f"{data_tool} is missing: scaletrain-data must be beside the trainer {trainer} (it "
                         f"reads each dataset's sample count)")
    inspected = {}  # series of one model share its dataset: inspect it once
    for model in study.models:
        if models_known and model.model not in models_known:
            where = (f"{model.where('model')} = {model.model!r}" if model.section.startswith("[series") and
                     model.where("model") != "--model" else f"model '{model.model}'")
            raise UsageError(f"{where}: {trainer} knows only the models {', '.join(sorted(models_known))}")
        config = model.values.get("config")
        if config is not None:
            if not config.is_file():
                raise UsageError(f"{model.where('config')} = {str(config)!r}: no such file")
            model.config_values = read_trainer_config(config)
        key = (str(model.values["data"]), model.get("data-checks", "require"))
        if key not in inspected:
            inspected[key] = count_train_samples(data_tool, model)
        model.train_samples, model.task, model.train_tokens = inspected[key]


def read_trainer_config(path):
    """The key = value lines of a scaletrain config file (the values the runs inherit)."""
    values = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"config {path}: cannot read it: {error}") from None
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


NCF_NEGATIVES_PER_POSITIVE = 4  # data/negative_sampler.hpp kDefaultNegativesPerPositive


def count_train_samples(data_tool, model):
    """(samples of an epoch, the dataset's task, target tokens of a translation split or None)."""
    data = model.values["data"]
    origin = f"{model.where('data')} = {str(data)!r}"
    if not data.is_dir():
        raise UsageError(f"{origin}: no such directory (the dataset needs train/ and val/, docs/dataset-format.md)")
    checks = model.get("data-checks", "require")
    # data-checks = require: the runs' own verdict (--require-checksums), before anything is submitted.
    require = ["--require-checksums"] if checks == "require" else []
    result = run_tool([str(data_tool), "inspect", str(data), "--json"] + require, "scaletrain-data inspect")
    if result.returncode != 0 and require and "--require-checksums: " in result.stderr:
        message = "\n".join(line for line in result.stderr.strip().split("--require-checksums: ", 1)[1].splitlines()
                            if not line.startswith("Run 'scaletrain-data"))
        raise UsageError(f"{origin}: refused by data-checks = require (--require-checksums, which every run "
                         f"would refuse at start-up): {message}\n(--verify-data is data-checks = verify here; "
                         f"data-checks = none trains on it unchecked; docs/reliability.md)")
    if result.returncode != 0:
        lines = (result.stderr.strip() or result.stdout.strip()).splitlines()
        reason = lines[-1] if lines else "scaletrain-data inspect failed"
        raise UsageError(f"{origin}: not a valid dataset: {reason}")
    try:
        train = json.loads(result.stdout)["splits"]["train"]
        task = train.get("task") or "image_classification"
        tokens = None
        if task == "recommendation":
            # A recommendation epoch is every positive and its 4 sampled negatives (MLPerf NCF).
            samples = int(train["positives"]) * (1 + NCF_NEGATIVES_PER_POSITIVE)
        elif task == TRANSLATION:
            # Sentence pairs, and the target tokens (end of sentence included) that tokens/s counts.
            samples, tokens = int(train["rows"]), int(train["target_tokens"])
        else:
            samples = int(train["samples"])
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"{origin}: scaletrain-data inspect finds no train split") from None
    if checks == "verify":
        missing = [name for name, split in json.loads(result.stdout)["splits"].items() if not split.get("manifest")]
        if missing:
            raise UsageError(f"{origin}: data-checks = verify needs each split's manifest.json, and "
                             f"{' and '.join(missing)} {'has' if len(missing) == 1 else 'have'} none: where the data is "
                             f"known good, write them with `scaletrain-data manifest {data}`")
    return samples, task, tokens


def slurm_seconds(text):
    """Seconds of a Slurm time limit (for comparing it with the checkpoint warning)."""
    match = SLURM_TIME_RE.match(text)
    days, hours, minutes, seconds = 0, 0, 0, 0
    if match.group(1) is not None:
        days, hours = int(match.group(1)), int(match.group(2))
        minutes, seconds = int(match.group(3) or 0), int(match.group(4) or 0)
    elif match.group(7) is not None:
        hours, minutes, seconds = int(match.group(5)), int(match.group(6)), int(match.group(7))
    else:
        minutes, seconds = int(match.group(5)), int(match.group(6) or 0)
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def job_script_default(pattern, fallback):
    """A value of train.sbatch's #SBATCH lines (e.g. its --time), or fallback."""
    try:
        text = TRAIN_JOB.read_text(encoding="utf-8")
    except OSError:
        return fallback
    match = re.search(r"^#SBATCH\s+" + pattern, text, re.MULTILINE)
    return match.group(1) if match else fallback


def warning_seconds(sbatch_options):
    """How long before the time limit train.sbatch gets its checkpoint signal (--signal=B:USR1@S)."""
    for option in reversed(sbatch_options):
        match = re.fullmatch(r"--signal=\S*@(\d+)", option)
        if match:
            return int(match.group(1))
    return int(job_script_default(r"--signal=\S*@(\d+)", "0"))


def option_name(word):
    """'--nodes=4' -> '--nodes', '-N4' -> '-N'."""
    if word.startswith("--"):
        return word.split("=", 1)[0]
    return word[:2] if word.startswith("-") else word


def check_sbatch_options(study):
    for key in ("sbatch-options", "report-sbatch-options"):
        for word in study.get(key, []):
            name = option_name(word)
            if name in OWN_SBATCH_OPTIONS:
                raise UsageError(f"{study.where(key)}: {name} is set by the study ({OWN_SBATCH_OPTIONS[name]}); "
                                 f"remove it from {key}")
    for model in study.models:
        for word in model.train_options:
            name = option_name(word)
            if name in OWN_TRAIN_OPTIONS:
                raise UsageError(f"{model.where('train-options')}: {name} is set per run by the study "
                                 f"({OWN_TRAIN_OPTIONS[name]}); remove it from train-options")
    check_gpu_options(study)


GPU_SBATCH_OPTIONS = ("--gpus-per-node", "--gres", "--gpus", "-G", "--gpus-per-task")


def gpus_asked_per_node(words):
    """The GPUs per node that sbatch options ask for (--gpus-per-node=[TYPE:]K, --gres=gpu[:TYPE]:K),
    or None."""
    text = " ".join(words)
    match = (re.search(r"--gpus-per-node[= ](?:[A-Za-z0-9_.-]+:)?(\d+)\b", text) or
             re.search(r"--gres[= ](?:\S*,)?gpu(?::[A-Za-z0-9_.-]+)?:(\d+)\b", text))
    return int(match.group(1)) if match else None


def check_gpu_options(study):
    """With request-gpus each run asks for its own GPUs, so sbatch-options must not; without it, GPUs
    asked in sbatch-options are the same for every run and must cover each run's ranks on a node."""
    options = study.get("sbatch-options", [])
    if study.get("request-gpus", "no") != "no":
        for word in options:
            if option_name(word) in GPU_SBATCH_OPTIONS:
                raise UsageError(f"{study.where('sbatch-options')}: {option_name(word)} asks for GPUs, and "
                                 f"{study.where('request-gpus')} = {study.get('request-gpus')} asks each run for its "
                                 f"own (one per rank); remove it from sbatch-options")
        return
    asked = gpus_asked_per_node(options)
    if asked is None:
        return
    for model in study.models:
        more = [(n, r) for n, r in model.points() if r > asked]
        if more:
            raise UsageError(f"{study.where('sbatch-options')}: every run asks for {asked} GPUs per node, but "
                             f"{model.describe()} has runs with {more[0][1]} ranks per node "
                             f"({model.where('ranks-per-node')} = {model.get('ranks-per-node')}); set "
                             f"request-gpus = gpus-per-node (or gres) in [study], which asks each run for one GPU per "
                             f"rank, and remove the GPUs from sbatch-options")


def check_time_limits(study):
    warning = warning_seconds(study.get("sbatch-options", []))
    for model in study.models:
        limit = model.get("time") or job_script_default(r"--time=(\S+)", "04:00:00")
        if warning and slurm_seconds(limit) <= warning + 60:
            raise UsageError(f"{model.where('time')} = {limit!r}: train.sbatch asks for its checkpoint signal "
                             f"{warning} s before the time limit; a limit this short would checkpoint and requeue "
                             f"at once. Give more than {warning + 60} s")


def trains_text(models):
    """"model transformer trains translation (the task of its dataset DIR)", for one or more series."""
    tasks = sorted({m.task for m in models})
    data = sorted({str(m.values["data"]) for m in models})
    whose = ("its dataset" if len(models) == 1 else "their dataset" if len(data) == 1 else "their datasets")
    return (f"{', '.join(m.describe() for m in models)} train{'s' if len(models) == 1 else ''} "
            f"{' and '.join(tasks)} (the task of {whose} {', '.join(data)})")


def wrong_unit_text(key, models, as_option):
    """Why a batch key of one unit does not fit models whose batches count the other."""
    unit = KEY_UNIT[key]
    other = SAME_IN_OTHER_UNIT.get(key)
    name = (lambda k: f"--{k}" if as_option else k)  # noqa: E731
    if unit == "samples":
        fix = (f"use {name(other)} instead" if other else "remove it: the trainer does not accumulate a translation "
               "model's token batches (--accumulate-steps is refused); --batch-tokens is the whole batch of a rank")
        return f"a batch in samples, and {trains_text(models)}, whose batches count tokens: {fix}"
    return (f"a batch in tokens, for a translation model, and {trains_text(models)}, whose batches count samples: "
            f"use {name(other)} instead")


NEEDED_BY = {"global-batch": "the strong series", "max-batch-per-rank": "the strong series",
             "global-batch-tokens": "the strong series", "batch-per-rank": "the weak series",
             "batch-tokens-per-rank": "the weak series", "reference-batch-tokens": "lr-scaling linear"}


def check_batches(study):
    """Each series' batch keys in its unit (samples, or tokens for a translation model, known from its
    dataset), and its quality target on its scale. A key in [study] (or its option) applies to the
    models of its unit and is an error only where no model of the study has that unit; in a model or
    series section a key of the other unit is an error."""
    units = {m.unit for m in study.models}
    for key, unit in KEY_UNIT.items():
        if study.get(key) is not None and unit not in units:
            where = study.where(key)
            raise UsageError(f"{where} = {study.get(key)}: "
                             f"{wrong_unit_text(key, study.models, where.startswith('--'))}")
    for model in study.models:
        for key, unit in KEY_UNIT.items():
            if unit != model.unit and key in model.values:
                raise UsageError(f"{model.where(key)} = {model.values[key]}: {wrong_unit_text(key, [model], False)}")
        needs = []
        if "strong" in model.modes:
            needs += [model.batch_key("global")] + (["max-batch-per-rank"] if model.unit == "samples" else [])
        if "weak" in model.modes:
            needs += [model.batch_key("per-rank")]
        if study.get("lr-scaling", "none") == "linear" and model.unit == "tokens":
            needs += ["reference-batch-tokens"]  # no default: 256 samples mean nothing in tokens
        for key in needs:
            if model.get(key) is None:
                other = SAME_IN_OTHER_UNIT.get(key)
                hint = ""
                if other and study.get(other) is not None:
                    hint = (f". ({study.where(other)} = {study.get(other)} is in {KEY_UNIT[other]}, for the "
                            f"study's models whose batches count {KEY_UNIT[other]}; {model.describe()} trains "
                            f"{model.task}, whose batches count {model.unit}.)")
                raise UsageError(f"{study.source}: {key} is not set for {model.describe()}; {NEEDED_BY[key]} needs "
                                 f"it ({model.keys_text(key)}){hint}")
    target = study.get("target-accuracy")
    fractions = [m for m in study.models if m.unit == "samples"]
    if target is not None and target > 1 and fractions:
        raise UsageError(f"{study.where('target-accuracy')} = {number_text(target)}: {trains_text(fractions)}, "
                         f"whose quality (top-1 accuracy, or HR@10 for recommendation) is a fraction in (0, 1], e.g. "
                         f"0.759; only a translation model's target is BLEU (0..100]")


# ---------------------------------------------------------------------------------------------
# Planning the runs.
# ---------------------------------------------------------------------------------------------

def accumulation_steps(per_rank, max_micro):
    """The smallest K that splits per_rank samples into K equal micro-batches of at most max_micro."""
    if max_micro is None:
        return 1
    for k in range(1, per_rank + 1):
        if per_rank % k == 0 and per_rank // k <= max_micro:
            return k
    return per_rank


def valid_node_counts_near(global_batch, ranks_per_node, nodes):
    """Node counts whose rank count divides global_batch: the nearest below and above nodes."""
    below = [n for n in range(nodes - 1, 0, -1) if global_batch % (n * ranks_per_node) == 0][:1]
    above = [n for n in range(nodes + 1, global_batch // ranks_per_node + 1)
             if global_batch % (n * ranks_per_node) == 0][:1]
    return below + above


def batches_dividing_all(global_batch, rank_counts):
    """The global batches nearest global_batch that divide by every rank count of the series."""
    step = math.lcm(*rank_counts)
    lower = (global_batch // step) * step
    return [b for b in (lower, lower + step) if b > 0]


def valid_gpu_counts_near(global_batch, ranks_per_node, gpus):
    """GPU counts of one node whose rank count divides global_batch: the nearest below and above."""
    below = [g for g in range(gpus - 1, 0, -1) if global_batch % g == 0][:1]
    above = [g for g in range(gpus + 1, ranks_per_node + 1) if global_batch % g == 0][:1]
    return below + above


def check_strong_divisibility(model):
    """A strong series' global batch, in samples or tokens, divides by the ranks of every run: refused
    otherwise, naming the valid counts near each one that does not."""
    key = model.batch_key("global")
    global_batch = model.get(key)
    rpn, gpus, nodes = model.get("ranks-per-node"), model.get("gpus") or [], model.get("nodes") or []
    bad_gpus = [g for g in gpus if global_batch % g]
    bad = [n for n in nodes if global_batch % (n * rpn)]
    if not bad and not bad_gpus:
        return
    lines = []
    for g in bad_gpus:
        near = valid_gpu_counts_near(global_batch, rpn, g)
        lines.append(f"  {g} GPUs of one node = {g} ranks: {global_batch} / {g} is not an integer; valid GPU counts "
                     f"near {g}: {', '.join(map(str, near)) if near else 'none'}")
    for n in bad:
        near = valid_node_counts_near(global_batch, rpn, n)
        near_text = ", ".join(map(str, near)) if near else "none"
        lines.append(f"  {n} nodes = {n * rpn} ranks: {global_batch} / {n * rpn} is not an "
                     f"integer; valid node counts near {n}: {near_text}")
    count = len(bad) + len(bad_gpus)
    counts = ([f"{model.where('gpus')} = {','.join(map(str, gpus))}"] if bad_gpus else []) + \
        ([f"{model.where('nodes')} = {','.join(map(str, nodes))}, {rpn} ranks per node"] if bad else [])
    suggestion = batches_dividing_all(global_batch, [r * n for n, r in model.points()])
    unit = " tokens" if model.unit == "tokens" else ""
    raise UsageError(
        f"strong series of {model.describe()}: global batch {global_batch}{unit} ({model.where(key)}) does not "
        f"divide by the ranks of {count} {'run' if count == 1 else 'runs'} ({'; '.join(counts)}):\n" +
        "\n".join(lines) +
        f"\nNothing was submitted. Drop those counts, or choose a global batch that divides by every rank count "
        f"of the series, e.g. {' or '.join(map(str, suggestion))}.")


def learning_rate(model, global_batch):
    """The run's --base-lr: the linear rule's, or base-lr, or the model config's."""
    base = model.get("base-lr")
    if model.study.get("lr-scaling", "none") == "linear":
        reference = model.get(model.batch_key("reference"), 256 if model.unit == "samples" else None)
        return round_number(base * global_batch / reference)
    if base is not None:
        return base
    if "base-lr" not in model.config_values and model.unit == "tokens":
        return None  # the translation model's own default (the reference's rsqrt peak), not an image model's 0.1
    return float(model.config_values.get("base-lr", 0.1))


def round_number(value):
    """10 significant digits: 0.1 x 48 / 32 is 0.15, not 0.15000000000000002."""
    return float(f"{value:.10g}")


def number_text(value):
    return f"{value:.10g}"


def run_epochs(model, global_batch, run_id):
    """--epochs of a run: the study's, or for a steps study the epochs that cover its steps. A
    translation model's steps per epoch are estimated from the training split's target tokens over
    the global batch in tokens: a rank's batch holds at most --batch-tokens tokens a side, padding
    included, so an epoch has at least that many steps, and the epochs cover the steps."""
    study = model.study
    if model.unit == "tokens":
        size, what = model.train_tokens, "target tokens"
    else:
        size, what = model.train_samples, "samples"
    steps_per_epoch = size // global_batch
    unit = " tokens" if model.unit == "tokens" else ""
    if steps_per_epoch < 1:
        raise UsageError(f"run {run_id}: global batch {global_batch}{unit} is larger than the {size} training "
                         f"{what} of {model.values['data']}: not one step per epoch")
    if "steps" not in study.values:
        return study.get("epochs")
    needed = math.ceil(study.get("steps") / steps_per_epoch)
    epochs = study.get("epochs")
    if epochs is not None and epochs < needed:
        estimate = " at least" if model.unit == "tokens" else ""
        raise UsageError(f"{study.where('epochs')} = {epochs}: run {run_id} has{estimate} {steps_per_epoch} steps per "
                         f"epoch ({size} {what} / global batch {global_batch}{unit}); steps = "
                         f"{study.get('steps')} needs epochs >= {needed} (or leave epochs out)")
    return epochs if epochs is not None else needed


def plan_runs(study):
    """Every run of the study, in submission order: repeat by repeat, then series, mode, ranks."""
    for model in study.models:
        if "strong" in model.modes:
            check_strong_divisibility(model)
    runs = []
    for repeat in range(1, study.get("repeats", 1) + 1):
        for model in study.models:
            for mode in model.modes:
                for nodes, rpn in model.points():
                    runs.append(plan_run(study, model, mode, nodes, rpn, repeat))
    return runs


def point_name(model, nodes, rpn):
    """A run's point in its id and directory: nN on whole nodes, gG for G GPUs of one node."""
    return f"n{nodes}" if nodes > 1 or (rpn == model.get("ranks-per-node") and 1 in (model.get("nodes") or [])) \
        else f"g{rpn}"


def plan_run(study, model, mode, nodes, rpn, repeat):
    ranks = nodes * rpn
    point = point_name(model, nodes, rpn)
    run_id = f"{model.name}/{mode}-{point}-r{repeat}"
    if mode == "strong":
        global_batch = model.get(model.batch_key("global"))
        per_rank = global_batch // ranks
    else:
        per_rank = model.get(model.batch_key("per-rank"))
        global_batch = per_rank * ranks
    # The trainer does not accumulate a translation model's batches: --batch-tokens is the rank's whole step.
    k = 1 if model.unit == "tokens" else accumulation_steps(per_rank, model.get("max-batch-per-rank"))
    seed = study.get("seed")
    if seed is None:
        seed = int(model.config_values.get("seed", 0))
    warmup = model.get("warmup-epochs")
    return {
        "id": run_id, "series": model.name, "model": model.model, "mode": mode, "nodes": nodes,
        "ranks_per_node": rpn, "ranks": ranks, "global_batch": global_batch, "batch_per_rank": per_rank // k,
        "accumulate_steps": k, "batch_unit": model.unit, "base_lr": learning_rate(model, global_batch),
        "warmup_epochs": warmup,
        "epochs": run_epochs(model, global_batch, run_id), "seed": seed + repeat - 1, "repeat": repeat,
        "output_dir": str(study.get("output") / model.name / f"{mode}-{point}-r{repeat}"),
        "job_name": f"{study.name}-{model.name}-{mode}-{point}-r{repeat}",
        "job_id": None, "submissions": [],
    }


def train_arguments(study, model, run):
    if run.get("batch_unit") == "tokens":
        args = ["--batch-tokens", str(run["batch_per_rank"])]
    else:
        args = ["--batch-size", str(run["batch_per_rank"])]
    if run["accumulate_steps"] > 1:
        args += ["--accumulate-steps", str(run["accumulate_steps"])]
    if run["base_lr"] is not None:
        args += ["--base-lr", number_text(run["base_lr"])]
    if run["warmup_epochs"] is not None:
        args += ["--warmup-epochs", number_text(run["warmup_epochs"])]
    if run["epochs"] is not None:
        args += ["--epochs", str(run["epochs"])]
    if study.get("steps") is not None:
        args += ["--max-steps", str(study.get("steps"))]
    if study.get("target-accuracy") is not None:
        args += ["--target-accuracy", number_text(study.get("target-accuracy"))]
    return args + ["--seed", str(run["seed"])] + model.train_options


def site_options(study, for_report):
    options = []
    keys = ("partition", "account", "qos") if for_report else ("partition", "account", "qos", "constraint")
    for key in keys:
        if study.get(key) is not None:
            options.append(f"--{key}={study.get(key)}")
    options += study.get("report-sbatch-options" if for_report else "sbatch-options", [])
    return options


def run_sbatch_words(study, model, run, trainer):
    """The run's sbatch command after `sbatch --parsable [--dependency=...]`."""
    exports = {"DATA": model.values["data"], "MODEL": model.model, "OUTPUT_DIR": run["output_dir"],
               "SCALETRAIN": trainer, "DATA_CHECKS": model.get("data-checks", "require")}
    if model.values.get("config") is not None:
        exports["CONFIG"] = model.values["config"]
    export = "ALL," + ",".join(f"{k}={v}" for k, v in exports.items())
    limit = model.get("time") or job_script_default(r"--time=(\S+)", "04:00:00")
    gpus = {"no": [], "gpus-per-node": [f"--gpus-per-node={run['ranks_per_node']}"],
            "gres": [f"--gres=gpu:{run['ranks_per_node']}"]}[study.get("request-gpus", "no")]
    return ([f"--job-name={run['job_name']}", f"--nodes={run['nodes']}", f"--ntasks-per-node={run['ranks_per_node']}"] +
            gpus + [f"--time={limit}", f"--output={study.get('output') / 'logs'}/%x-%j.out"] +
            site_options(study, False) +
            [f"--export={export}", str(TRAIN_JOB)] + train_arguments(study, model, run))


def report_sbatch_words(study_dir, name, report_time, report_options):
    return ([f"--job-name={name}-report", "--nodes=1", "--ntasks=1", f"--time={report_time}",
             f"--output={study_dir / 'logs'}/%x-%j.out"] + report_options +
            [f"--export=ALL,STUDY_DIR={study_dir},SCALETRAIN_REPORT={REPORT_TOOL},"
             f"SCALETRAIN_STUDY={Path(__file__).resolve()}", str(REPORT_JOB), str(study_dir)])


def check_data_checks_supported(study, options, trainer):
    for model in study.models:
        if model.get("data-checks", "require") != "none" and "--require-checksums" not in options:
            raise UsageError(f"{model.where('data-checks') or 'data-checks (default require)'}: {trainer} has no "
                             f"--require-checksums: build a newer scaletrain, or set data-checks = none")


def check_tokens_supported(runs, options, trainer):
    needing = [r["id"] for r in runs if r.get("batch_unit") == "tokens"]
    if needing and "--batch-tokens" not in options:
        raise UsageError(f"runs {', '.join(needing[:3])}{' ...' if len(needing) > 3 else ''} batch by tokens "
                         f"(--batch-tokens), which {trainer} does not have: build a newer scaletrain")


def check_accumulation_supported(runs, options, trainer):
    needing = [r["id"] for r in runs if r["accumulate_steps"] > 1]
    if needing and "--accumulate-steps" not in options:
        raise UsageError(f"runs {', '.join(needing[:3])}{' ...' if len(needing) > 3 else ''} need --accumulate-steps "
                         f"(batch per rank above max-batch-per-rank), which {trainer} does not have: build a newer "
                         f"scaletrain, or raise max-batch-per-rank")


# ---------------------------------------------------------------------------------------------
# Slurm.
# ---------------------------------------------------------------------------------------------

def sbatch_path():
    path = shutil.which("sbatch")
    if path is None:
        raise Failure("sbatch not found on PATH: run scaletrain-study where Slurm's commands are (a login node), "
                      "or use --dry-run to print the sbatch lines")
    return path


def test_only(words, what):
    """sbatch --test-only: Slurm's own verdict on a job (partition, account, node count) without
    submitting it."""
    result = run_tool(["sbatch", "--test-only"] + words, "sbatch --test-only")
    if result.returncode != 0:
        message = " ".join((result.stderr + result.stdout).split())
        raise UsageError(f"Slurm refuses {what}: {message or 'sbatch --test-only failed'}\n  the job: sbatch "
                         f"{shlex.join(words)}\nNothing was submitted.")


def submit_job(words, dependency):
    argv = ["sbatch", "--parsable"] + ([f"--dependency=afterany:{dependency}"] if dependency else []) + words
    result = run_tool(argv, "sbatch")
    job_id = result.stdout.strip().split(";")[0]
    if result.returncode != 0 or not job_id.isdigit():
        message = " ".join((result.stderr + result.stdout).split())
        raise Failure(f"sbatch failed (exit {result.returncode}): {message}\n  the command: {shlex.join(argv)}")
    return job_id, shlex.join(argv)


ACTIVE_STATES = {"PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "COMPLETING",
                 "SUSPENDED", "RESIZING", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD", "STOPPED", "SPECIAL_EXIT"}


def slurm_states(job_ids):
    """{job id: (state, reason)} for the jobs Slurm still knows (squeue -t all shows finished jobs
    until MinJobAge); None when squeue cannot be asked."""
    ids = sorted({j for j in job_ids if j}, key=int)
    if not ids:
        return {}
    if shutil.which("squeue") is None:
        return None
    states = {}
    for start in range(0, len(ids), 400):
        chunk = ids[start:start + 400]
        result = run_tool(["squeue", "-h", "-t", "all", "-j", ",".join(chunk), "-o", "%i|%T|%r"], "squeue")
        if result.returncode != 0 and not result.stdout.strip():
            if "Invalid job id" in result.stderr:
                continue
            return None
        for line in result.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 3:
                states[parts[0]] = (parts[1], parts[2])
    return states


# ---------------------------------------------------------------------------------------------
# The manifest.
# ---------------------------------------------------------------------------------------------

def write_manifest(study_dir, manifest):
    """Atomically (temporary file, then rename): a reader never sees half a manifest."""
    path = study_dir / MANIFEST
    temporary = path.with_suffix(".json.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2)
        handle.write("\n")
    os.replace(temporary, path)


def resolve_study_dir(text):
    """STUDY as a directory, its study.json, or the study file whose output key names it."""
    path = Path(text).resolve()
    if path.is_dir():
        study_dir = path
    elif path.name == MANIFEST and path.is_file():
        study_dir = path.parent
    elif path.is_file():
        study_settings, _, _ = read_study_file(path)
        if "output" not in study_settings:
            raise UsageError(f"study file {path} has no output key: give the study directory")
        study_dir = resolve_path(study_settings["output"])
    else:
        raise UsageError(f"{text}: no such study directory or study file")
    if not (study_dir / MANIFEST).is_file():
        raise UsageError(f"{study_dir} has no {MANIFEST}: submit the study first (scaletrain-study submit)")
    return study_dir


def load_manifest(study_dir):
    path = study_dir / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise Failure(f"{path}: cannot read it: {error}") from None
    if manifest.get("format") != MANIFEST_FORMAT or not isinstance(manifest.get("runs"), list):
        raise Failure(f"{path}: not a study manifest of format {MANIFEST_FORMAT}")
    return manifest


def study_parameters(study, trainer):
    lr = {"rule": study.get("lr-scaling", "none"), "base_lr": study.get("base-lr"),
          "warmup_epochs": study.get("warmup-epochs")}
    if lr["rule"] == "linear":
        lr["reference_batch"] = study.get("reference-batch", 256)
    models = []
    for model in study.models:
        # name is the series (what the runs' ids and directories start with); model is scaletrain's --model.
        entry = {"name": model.name, "series": model.name, "model": model.model, "modes": model.modes,
                 "nodes": model.get("nodes"), "gpus": model.get("gpus"), "ranks_per_node": model.get("ranks-per-node"),
                 "config": str(model.values["config"]) if "config" in model.values else None,
                 "data": str(model.values["data"]), "train_samples": model.train_samples,
                 "train_options": model.train_options, "data_checks": model.get("data-checks", "require")}
        tokens = model.unit == "tokens"
        for key in ("global-batch", "batch-per-rank", "max-batch-per-rank", "base-lr", "reference-batch",
                    "warmup-epochs", "time"):
            # A translation model's batches are in tokens (below): [study]'s sample batches are not its own.
            entry[key.replace("-", "_")] = (None if tokens and key in KEY_UNIT else
                                            model.get(key, 256 if key == "reference-batch" else None))
        if tokens:
            # Only for a translation model, so that the entries of the other models read as before.
            entry.update({"task": model.task, "batch_unit": "tokens", "train_tokens": model.train_tokens})
            for key in BATCH_KEYS["tokens"].values():
                entry[key.replace("-", "_")] = model.get(key)
        models.append(entry)
    token_keys = {key.replace("-", "_"): study.get(key) for key in ("global-batch-tokens", "batch-tokens-per-rank")
                  if study.get(key) is not None}
    if lr["rule"] == "linear" and study.get("reference-batch-tokens") is not None:
        lr["reference_batch_tokens"] = study.get("reference-batch-tokens")
    return {
        "models": models, "modes": study.modes, "nodes": study.get("nodes"),
        "gpus": study.get("gpus"), "request_gpus": study.get("request-gpus", "no"),
        "ranks_per_node": study.get("ranks-per-node"), "global_batch": study.get("global-batch"),
        "batch_per_rank": study.get("batch-per-rank"), "max_batch_per_rank": study.get("max-batch-per-rank"),
        **token_keys,
        "lr_scaling": lr, "run_length": study.run_length(), "repeats": study.get("repeats", 1),
        "seed": study.get("seed"), "chain": study.get("chain", False),
        "time": study.get("time") or job_script_default(r"--time=(\S+)", "04:00:00"),
        "sbatch_options": site_options(study, False), "train_options": study.get("train-options", []),
        "report_time": study.get("report-time", "00:30:00"), "report_sbatch_options": site_options(study, True),
        "scaletrain": str(trainer), "train_job": str(TRAIN_JOB), "report_job": str(REPORT_JOB),
        "study_dir": str(study.get("output")),
    }


# ---------------------------------------------------------------------------------------------
# submit
# ---------------------------------------------------------------------------------------------

def check_fresh_study_dir(study_dir, runs):
    if (study_dir / MANIFEST).exists():
        raise UsageError(f"{study_dir / MANIFEST} exists: this study was submitted already. Follow it with "
                         f"`scaletrain-study status {study_dir}`, rerun failed runs with `resubmit`, or choose "
                         f"another output directory")
    for run in runs:
        out = Path(run["output_dir"])
        if (out / "report.json").exists() or (out / "checkpoints").exists():
            raise UsageError(f"{out} holds a run already (report.json or checkpoints/); train.sbatch would resume "
                             f"it. Choose another output directory or remove it")


def prepare(args):
    """Everything submit checks before it submits: returns the study, the runs and their words."""
    study = load_study(args)
    check_sbatch_options(study)
    check_time_limits(study)
    for script in (TRAIN_JOB, REPORT_JOB):
        if not script.is_file():
            raise Failure(f"job script {script} is missing")
    trainer, options, models_known = check_trainer(study)
    check_data_checks_supported(study, options, trainer)
    check_models(study, trainer, models_known)
    check_batches(study)
    runs = plan_runs(study)
    check_accumulation_supported(runs, options, trainer)
    check_tokens_supported(runs, options, trainer)
    models = {m.name: m for m in study.models}
    words = {r["id"]: run_sbatch_words(study, models[r["series"]], r, trainer) for r in runs}
    for run in runs:
        run["sbatch_line"] = shlex.join(["sbatch"] + words[run["id"]])
    return study, trainer, runs, words


def check_with_slurm(runs, words):
    """sbatch --test-only once per distinct job shape (repeats differ only in names)."""
    seen = set()
    for run in runs:
        shape = (run["series"], run["mode"], run["nodes"], run["ranks_per_node"])
        if shape not in seen:
            seen.add(shape)
            test_only(words[run["id"]], f"run {run['id']}")


def command_submit(args):
    if not args.dry_run:
        sbatch_path()
    study, trainer, runs, words = prepare(args)
    study_dir = study.get("output")
    report_words = report_sbatch_words(study_dir, study.name, study.get("report-time", "00:30:00"),
                                       site_options(study, True))
    chain = study.get("chain", False)
    if args.dry_run:
        if shutil.which("sbatch"):
            check_with_slurm(runs, words)
            checked = "each job checked with sbatch --test-only"
        else:
            checked = "sbatch not found: not checked with Slurm"
        print_dry_run(study, runs, words, report_words, chain, checked)
        return EXIT_OK
    check_fresh_study_dir(study_dir, runs)
    check_with_slurm(runs, words)
    (study_dir / "logs").mkdir(parents=True, exist_ok=True)
    for run in runs:
        Path(run["output_dir"]).mkdir(parents=True, exist_ok=True)
    manifest = {"format": MANIFEST_FORMAT, "name": study.name, "study_file": str(study.file) if study.file else None,
                "created_unix": int(time.time()), "parameters": study_parameters(study, trainer), "runs": runs,
                "report_job_id": None, "report_submissions": []}
    write_manifest(study_dir, manifest)
    submit_runs(study_dir, manifest, runs, chain, after=None)
    submit_report(study_dir, manifest, [r["job_id"] for r in runs])
    print_submitted(study_dir, manifest, runs)
    return EXIT_OK


def submit_runs(study_dir, manifest, runs, chain, after):
    """Submits runs (chained: each after the previous, the first after `after`), recording each
    job id in the manifest as soon as sbatch returns it."""
    previous = after
    for index, run in enumerate(runs):
        words = shlex.split(run["sbatch_line"])[1:]
        try:
            job_id, line = submit_job(words, previous if chain else None)
        except Failure as error:
            done = index
            raise Failure(f"{error}\n{done} of {len(runs)} runs submitted, recorded in {study_dir / MANIFEST}; "
                          f"after fixing the cause, `scaletrain-study resubmit {study_dir} --failed` submits the "
                          f"rest") from None
        run["job_id"] = job_id
        run["submissions"].append({"job_id": job_id, "unix": int(time.time()), "sbatch": line})
        write_manifest(study_dir, manifest)
        previous = job_id


def submit_report(study_dir, manifest, job_ids):
    params = manifest["parameters"]
    words = report_sbatch_words(study_dir, manifest["name"], params["report_time"], params["report_sbatch_options"])
    dependency = ":".join(j for j in job_ids if j)
    job_id, line = submit_job(words, dependency or None)
    manifest["report_job_id"] = job_id
    manifest.setdefault("report_submissions", []).append({"job_id": job_id, "unix": int(time.time()), "sbatch": line})
    write_manifest(study_dir, manifest)


def print_dry_run(study, runs, words, report_words, chain, checked):
    print(f"# scaling study {study.name}: {len(runs)} runs and a report job; dry run, nothing submitted "
          f"({checked}).")
    print("set -e")
    print(f"mkdir -p {shlex.quote(str(study.get('output') / 'logs'))}  # Slurm does not create --output's directory")
    previous = None
    variables = []
    for index, run in enumerate(runs, 1):
        variable = f"job{index}"
        dependency = f" --dependency=afterany:${previous}" if chain and previous else ""
        print(f"# {run['id']}: {describe_batch(run)}, {lr_text(run)}")
        print(f"{variable}=$(sbatch --parsable{dependency} {shlex.join(words[run['id']])})")
        variables.append(variable)
        previous = variable
    dependency = ":".join(f"${v}" for v in variables)
    print("# the report, after every run")
    print(f"report=$(sbatch --parsable --dependency=afterany:{dependency} {shlex.join(report_words)})")


def lr_text(run):
    return "lr the model's default" if run["base_lr"] is None else f"lr {number_text(run['base_lr'])}"


def describe_batch(run):
    """"global batch 5120 = 8 ranks x 128 x 5 accumulation steps", "global batch 81920 tokens = 8 ranks
    x 10240 tokens"."""
    ranks = f"{run['ranks']} rank{'s' if run['ranks'] > 1 else ''}"
    if run.get("batch_unit") == "tokens":
        return f"global batch {run['global_batch']} tokens = {ranks} x {run['batch_per_rank']} tokens"
    text = f"global batch {run['global_batch']} = {ranks} x {run['batch_per_rank']}"
    return text + (f" x {run['accumulate_steps']} accumulation steps" if run["accumulate_steps"] > 1 else "")


def print_submitted(study_dir, manifest, runs):
    print(f"submitted {len(runs)} runs of study {manifest['name']} (jobs {runs[0]['job_id']}..{runs[-1]['job_id']}"
          f"{', chained' if manifest['parameters']['chain'] else ''}) and report job {manifest['report_job_id']}")
    for run in runs:
        print(f"  {run['id']:<32} job {run['job_id']:>8}  {describe_batch(run)}, {lr_text(run)}")
    print(f"manifest {study_dir / MANIFEST}; follow with: scaletrain-study status {study_dir}")


# ---------------------------------------------------------------------------------------------
# status
# ---------------------------------------------------------------------------------------------

FINISHED_REPORT = {"completed", "target_reached", "max_steps"}


def read_report(run):
    path = Path(run["output_dir"]) / "report.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def progress_from_log(study_dir, run):
    """The last progress line's epoch and step of a running job (report.json comes at the end)."""
    log = study_dir / "logs" / f"{run['job_name']}-{run['job_id']}.out"
    try:
        with open(log, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 65536))
            tail = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    matches = re.findall(r"epoch (\d+)/(\d+)\s+step (\d+)/(\d+)", tail)
    if not matches:
        return None
    epoch, _, step, per_epoch = map(int, matches[-1])
    return (epoch - 1) * per_epoch + step


def run_state(study_dir, run, states):
    """The run's Slurm state, report status, steps done and outcome."""
    report = read_report(run)
    report_status = report.get("status") if report else None
    steps = report.get("steps") if report else None
    slurm = None
    if run.get("job_id") and states is not None and run["job_id"] in states:
        slurm = states[run["job_id"]][0]
    if slurm in ACTIVE_STATES:
        outcome = "running" if slurm in ("RUNNING", "COMPLETING", "CONFIGURING") else "pending"
        if outcome == "running":
            logged = progress_from_log(study_dir, run)
            if logged is not None:
                steps = f"~{logged}"
    elif report_status in FINISHED_REPORT:
        outcome = "done"
    elif slurm is not None:
        outcome = "failed"
    elif report_status == "interrupted":
        outcome = "interrupted"
    elif report is not None:
        outcome = "failed"
    else:
        outcome = "missing"
    if slurm is None:
        slurm = "unknown" if run.get("job_id") else "-"
    return {"id": run["id"], "job_id": run.get("job_id"), "slurm": slurm, "report": report_status or "-",
            "steps": steps if steps is not None else "-", "outcome": outcome,
            "submissions": len(run.get("submissions", []))}


def study_states(study_dir, manifest):
    job_ids = [r.get("job_id") for r in manifest["runs"]] + [manifest.get("report_job_id")]
    states = slurm_states(job_ids)
    rows = [run_state(study_dir, run, states) for run in manifest["runs"]]
    report_state = None
    if manifest.get("report_job_id") and states:
        report_state = states.get(manifest["report_job_id"], ("unknown", ""))[0]
    return rows, states, report_state


def command_status(args):
    study_dir = resolve_study_dir(args.study)
    manifest = load_manifest(study_dir)
    rows, states, report_state = study_states(study_dir, manifest)
    if args.json:
        print(json.dumps({"study": manifest["name"], "study_dir": str(study_dir), "runs": rows,
                          "report_job_id": manifest.get("report_job_id"), "report_job_state": report_state,
                          "slurm_reachable": states is not None}, indent=2))
        return EXIT_OK
    print(f"study {manifest['name']} in {study_dir}")
    if states is None:
        print("(squeue cannot be asked here: states come from the run directories alone)")
    header = ("RUN", "JOB", "SLURM", "REPORT", "STEPS", "STATE")
    table = [header] + [(r["id"], r["job_id"] or "-", r["slurm"], r["report"], str(r["steps"]), r["outcome"])
                        for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    counts = {}
    for row in rows:
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    order = ("done", "running", "pending", "failed", "interrupted", "missing")
    print(f"{len(rows)} runs: " + ", ".join(f"{counts[o]} {o}" for o in order if o in counts))
    if manifest.get("report_job_id"):
        print(f"report job {manifest['report_job_id']}: {report_state or 'unknown'}; report: "
              f"{study_dir / 'report' / 'scaling.md'}")
    if any(r["outcome"] in RESUBMITTABLE for r in rows):
        print(f"rerun the failed, interrupted and missing runs with: scaletrain-study resubmit {study_dir} --failed")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# resubmit
# ---------------------------------------------------------------------------------------------

RESUBMITTABLE = {"failed", "interrupted", "missing"}


def select_runs(args, manifest, rows):
    by_id = {r["id"]: r for r in rows}
    if args.failed and args.runs:
        raise UsageError("give --failed or run ids, not both")
    if not args.failed and not args.runs:
        raise UsageError("say what to resubmit: --failed, or run ids such as "
                         f"{manifest['runs'][0]['id'] if manifest['runs'] else 'MODEL/strong-n1-r1'}")
    if args.failed:
        return [r["id"] for r in rows if r["outcome"] in RESUBMITTABLE]
    chosen = []
    for run_id in args.runs:
        row = by_id.get(run_id)
        if row is None:
            raise UsageError(f"run '{run_id}' is not in this study; its runs are e.g. "
                             f"{', '.join(list(by_id)[:4])}")
        if row["outcome"] in ("pending", "running"):
            raise UsageError(f"run {run_id} is {row['slurm']} as job {row['job_id']}: wait for it or scancel it first")
        if row["outcome"] == "done":
            raise UsageError(f"run {run_id} is done (report.json status {row['report']}); to run it again, remove "
                             f"its directory and resubmit it")
        chosen.append(run_id)
    return chosen


def command_resubmit(args):
    study_dir = resolve_study_dir(args.study)
    manifest = load_manifest(study_dir)
    rows, states, _ = study_states(study_dir, manifest)
    if states is None and not args.dry_run:
        raise Failure("squeue cannot be asked whether the study's jobs are still queued or running; resubmitting "
                      "without knowing could run a run twice into the same directory. Run it where Slurm answers")
    chosen = select_runs(args, manifest, rows)
    if not chosen:
        print(f"nothing to resubmit: no run of {manifest['name']} is failed, interrupted or missing")
        return EXIT_OK
    runs = [r for r in manifest["runs"] if r["id"] in chosen]
    chain = manifest["parameters"].get("chain", False)
    # Jobs of the study still queued or running: a chained rerun waits for them, and so does the new report.
    active = [r["job_id"] for r, row in zip(manifest["runs"], rows) if row["outcome"] in ("pending", "running")]
    after = ":".join(active) if chain and active else None
    if args.dry_run:
        print(f"# resubmit {len(runs)} runs of {manifest['name']} (dry run, nothing submitted)")
        previous = after
        for index, run in enumerate(runs, 1):
            dependency = f" --dependency=afterany:{previous}" if chain and previous else ""
            print(f"# {run['id']} (was job {run.get('job_id') or '-'})")
            print(f"job{index}=$(sbatch --parsable{dependency} {shlex.join(shlex.split(run['sbatch_line'])[1:])})")
            previous = f"$job{index}"
        return EXIT_OK
    sbatch_path()
    previous_ids = {r["id"]: r.get("job_id") for r in runs}
    submit_runs(study_dir, manifest, runs, chain, after)
    submit_report(study_dir, manifest, active + [r["job_id"] for r in runs])
    for run in runs:
        print(f"resubmitted {run['id']}: job {run['job_id']} (was {previous_ids[run['id']] or 'not submitted'}), "
              f"output {run['output_dir']}")
    print(f"report job {manifest['report_job_id']} after them; follow with: scaletrain-study status {study_dir}")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------

def command_report(args):
    study_dir = resolve_study_dir(args.study)
    if not REPORT_TOOL.is_file():
        raise Failure(f"the report tool {REPORT_TOOL} is missing from this repository")
    predictions = [arg for path in args.prediction for arg in ("--prediction", path)]
    return subprocess.call([sys.executable, str(REPORT_TOOL), str(study_dir)] + predictions)


# ---------------------------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------------------------

class Parser(argparse.ArgumentParser):
    """argparse with usage errors as UsageError (exit 2 with one clear line)."""

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)")


def add_study_options(parser):
    group = parser.add_argument_group("study parameters (each overrides the study file's key of the same name)")
    for param in PARAMS:
        if param.key in ("config", "data", "model"):
            continue
        name = "--" + param.key
        if param.parser is parse_bool:
            group.add_argument(name, dest=param.key.replace("-", "_"), action=argparse.BooleanOptionalAction,
                               default=None, help=param.help)
        else:
            group.add_argument(name, dest=param.key.replace("-", "_"), metavar=param.metavar, help=param.help)
    models = parser.add_argument_group("a model given by options (instead of, or over, a [model NAME] section)")
    models.add_argument("--model", metavar="NAME", help="the study is this model alone (resnet50, resnet20, ncf, "
                        "transformer, ...); its [model NAME] section, if any, is the start")
    models.add_argument("--config", metavar="FILE", help=PARAM_BY_KEY["config"].help)
    models.add_argument("--data", metavar="DIR", help=PARAM_BY_KEY["data"].help)


def build_parser():
    parser = Parser(prog="scaletrain-study", description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    submit = commands.add_parser("submit", help="submit a study", description="Submit a scaling study: see "
                                 "`scaletrain-study --help` for the study file. Options with shell-quoted values "
                                 "take '=': --train-options='--eval-every 4'.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    submit.add_argument("study_file", nargs="?", metavar="STUDY_FILE", help="the study file (INI); optional when "
                        "options give everything")
    submit.add_argument("--dry-run", action="store_true", help="print the sbatch lines as a shell script; submit, "
                        "create and write nothing")
    add_study_options(submit)
    status = commands.add_parser("status", help="show every run's state",
                                 description="One line per run: see `scaletrain-study --help`.")
    status.add_argument("study", metavar="STUDY", help="study directory, its study.json, or the study file")
    status.add_argument("--json", action="store_true", help="print the states as JSON")
    resubmit = commands.add_parser("resubmit", help="resubmit failed or missing runs",
                                   description="Resubmit runs alone: see `scaletrain-study --help`.")
    resubmit.add_argument("study", metavar="STUDY", help="study directory, its study.json, or the study file")
    resubmit.add_argument("runs", nargs="*", metavar="RUN_ID", help="runs to resubmit, e.g. resnet50/weak-n8-r2")
    resubmit.add_argument("--failed", action="store_true", help="every failed, interrupted and missing run")
    resubmit.add_argument("--dry-run", action="store_true", help="print the sbatch lines; submit nothing")
    report = commands.add_parser("report", help="build the report now", description="Run scaletrain-report "
                                 "STUDY_DIR: writes STUDY_DIR/report/.")
    report.add_argument("study", metavar="STUDY", help="study directory, its study.json, or the study file")
    report.add_argument("--prediction", action="append", default=[], metavar="FILE",
                        help="a prediction of `scaletrain-advisor predict --json` to set beside the measurement "
                             "(repeatable; passed to scaletrain-report)")
    return parser


def main(argv):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        handler = {"submit": command_submit, "status": command_status, "resubmit": command_resubmit,
                   "report": command_report}[args.command]
        return handler(args)
    except UsageError as error:
        print(f"scaletrain-study: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except Failure as error:
        print(f"scaletrain-study: error: {error}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
