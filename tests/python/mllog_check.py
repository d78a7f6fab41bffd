#!/usr/bin/env python3
"""Checks an MLPerf training log (the `:::MLLOG {json}` lines of mllog.txt) against the MLPerf
training logging rules for ResNet or the Transformer (translation), written from the rules
themselves:

  * mlcommons/logging, mlperf_logging/compliance_checker/training_<X.Y.Z>/   (what the
      official checker enforces)
      common.yaml, closed_common.yaml, open_common.yaml   (both benchmarks)
      closed_resnet.yaml, open_resnet.yaml, closed_resnet_sgd.yaml, closed_resnet_lars.yaml
      closed_transformer.yaml, open_transformer.yaml   (training_0.7.0 only: the Transformer
          left the suite after 0.7; training_1.0.0/closed_common.yaml no longer names it)
  * mlcommons/logging, mlperf_logging/mllog/mllog.py and constants.py   (the line format)
  * mlcommons/logging, mlperf_logging/package_checker/seed_checker.py   (seed, closed division)
  * mlcommons/training_policies, training_rules.adoc   (epoch numbering, each benchmark's
      evaluation schedule, ResNet's hyper-parameter constraints, the Transformer's fixed Adam
      epsilon and max_sequence_length's truncate-or-discard, the initialisation time limit)

Usage:  mllog_check.py [--benchmark resnet|transformer] [--ruleset X.Y] [--strict] MLLOG_FILE

Without --benchmark the log's submission_benchmark chooses the rules (resnet when the log has
none). Without --ruleset: 4.0 for resnet (the last ruleset with ResNet-50), 0.7 for the
Transformer (the only ruleset here with it; asking for another is a usage error).

Exit status: 0 and "mllog: OK (...)" when the log follows the rules; 1 and a list of every
violation otherwise; 2 for a bad command line, an unreadable file, or a log whose
submission_benchmark this checker does not know (ncf, a model outside MLPerf, ...).

Three kinds of finding:
  error    the log is malformed or lacks what the rules require of every log;
  warning  a rule that binds real submissions only (fixed-to-reference hyper-parameter values,
           the target accuracy: ResNet's 75.9 %, the Transformer's BLEU 25, the evaluation
           schedule: ResNet every 4 epochs, the Transformer every epoch, the initialisation
           time limit). --strict turns warnings into errors;
  note     tolerated by the official parser but unexpected from a file rank 0 writes itself
           (text before ':::MLLOG ', other lines, extra fields). Never fatal.

Where this checker is stricter than the official one it says so in the rule's origin: keys
required once must appear exactly once (the official checker only warns about repeats with
one value), every line needs metadata.file and metadata.lineno, time_ms never decreases, and
epochs, blocks and evaluations must nest and count up from 1.
"""
import argparse
import json
import math
import sys

TOKEN = ":::MLLOG "
LINE_FIELDS = ("namespace", "time_ms", "event_type", "key", "value", "metadata")
EVENT_TYPES = ("INTERVAL_START", "INTERVAL_END", "POINT_IN_TIME")
RUN_STOP_STATUSES = ("success", "aborted")  # mllog/constants.py SUCCESS, ABORTED
BENCHMARKS = ("resnet", "transformer")

# The training rulesets this checker knows: those that still had ResNet-50 (the Transformer is
# in 0.7 only: BENCHMARK_RULES). ResNet-50 was retired after v4.0 (training_rules.adoc,
# "Deprecated benchmarks ... Image classification ... v4.0"; 4.1's closed_common.yaml names
# resnet but training_4.1.0/ has no closed_resnet.yaml). Differences between them, from the
# yaml files: init_limit_min is the init_stop bound of common.yaml by division;
# gradient_accumulation_steps entered closed_common.yaml in 1.0.0; closed_resnet.yaml of
# 1.1.0-2.1.0 required weights_initialization lines (one per tensor, metadata.tensor).
RULESETS = {
    "0.7": {"dir": "training_0.7.0", "init_limit_min": {"closed": 20, "open": 20},
            "grad_accum": False, "weights_init": False},
    "1.0": {"dir": "training_1.0.0", "init_limit_min": {"closed": 30, "open": 30},
            "grad_accum": True, "weights_init": False},
    "1.1": {"dir": "training_1.1.0", "init_limit_min": {"closed": 30, "open": 30},
            "grad_accum": True, "weights_init": True},
    "2.0": {"dir": "training_2.0.0", "init_limit_min": {"closed": 30, "open": 240},
            "grad_accum": True, "weights_init": True},
    "2.1": {"dir": "training_2.1.0", "init_limit_min": {"closed": 30, "open": 240},
            "grad_accum": True, "weights_init": True},
    "3.0": {"dir": "training_3.0.0", "init_limit_min": {"closed": 30, "open": 240},
            "grad_accum": True, "weights_init": False},
    "3.1": {"dir": "training_3.1.0", "init_limit_min": {"closed": 30, "open": 240},
            "grad_accum": True, "weights_init": False},
    "4.0": {"dir": "training_4.0.0", "init_limit_min": {"closed": 30, "open": 240},
            "grad_accum": True, "weights_init": False},
}

# Origins named in messages. "{rs}" becomes the ruleset's directory, e.g. training_4.0.0.
COMMON = "{rs}/common.yaml"
CLOSED_COMMON = "{rs}/closed_common.yaml"
DIVISION_COMMON = "{rs}/{division}_common.yaml"
CLOSED_RESNET = "{rs}/closed_resnet.yaml"
DIVISION_RESNET = "{rs}/{division}_resnet.yaml"
CLOSED_TRANSFORMER = "{rs}/closed_transformer.yaml"
DIVISION_TRANSFORMER = "{rs}/{division}_transformer.yaml"
SGD_RULES = "{rs}/closed_resnet_sgd.yaml"
LARS_RULES = "{rs}/closed_resnet_lars.yaml"
SEED_RULES = "package_checker/seed_checker.py"
MLLOG_FORMAT = "mllog/mllog.py"
POLICIES = "training_rules.adoc"
# Rules the official checker does not enforce but a single-writer scaletrain log must follow.
STRICTER = "stricter than the official checker"

# What differs by benchmark: the rulesets that have it, the default (the last of them), the
# target accuracy, the evaluation schedule and what eval_accuracy measures.
#   resnet:      above; closed_resnet.yaml ATLEAST_ONE_CHECK v >= 0.7590 and v < 1.0 (open:
#                v < 1.0 from 1.0.0 on; this checker asks that of open logs in 0.7 as well);
#                training_rules.adoc "Quality measure": every 4 epochs with offset 0, 1, 2 or 3.
#   transformer: training_0.7.0 only (training_1.0.0/closed_common.yaml's benchmarks no longer
#                include it; 0.6.0's single transformer.yaml predates the closed/open files
#                this checker reads); closed_transformer.yaml and open_transformer.yaml
#                ATLEAST_ONE_CHECK v >= 0.2500 and v < 1 (eval_accuracy is BLEU / 100:
#                training_rules.adoc's target "25.00 BLEU"); training_rules.adoc "Quality
#                measure": every 1 epoch.
BENCHMARK_RULES = {
    "resnet": {"rulesets": tuple(RULESETS), "default_ruleset": "4.0", "retired_after": "4.0",
               "target": {"closed": 0.759, "open": None}, "eval_every_epochs": 4,
               "schedule": "ResNet evaluates every 4 epochs", "first_eval": "1..4",
               "missed_target": "reached the target {target} (best {best})",
               "metric": "a top-1 accuracy in [0, 1]", "epoch_num_origin": CLOSED_RESNET,
               "accuracy_origin": DIVISION_RESNET},
    "transformer": {"rulesets": ("0.7",), "default_ruleset": "0.7", "retired_after": "0.7",
                    "target": {"closed": 0.25, "open": 0.25}, "eval_every_epochs": 1,
                    "schedule": "the Transformer evaluates every epoch", "first_eval": "1",
                    # A copy task's BLEU of 100 (1.0) reaches 0.25 but not the rule's range.
                    "missed_target": "is in [{target}, 1.0), BLEU 25.00 up to but not "
                                     "including 100 (best {best})",
                    "metric": "BLEU / 100 in [0, 1]",
                    "epoch_num_origin": DIVISION_TRANSFORMER,
                    "accuracy_origin": DIVISION_TRANSFORMER},
}

# Interval keys, as mllog.start()/mllog.end() write them; every other key the rules name is an
# event (mllog.event(), POINT_IN_TIME).
INTERVALS = {"init_start": "init_stop", "run_start": "run_stop", "block_start": "block_stop",
             "epoch_start": "epoch_stop", "eval_start": "eval_stop",
             "staging_start": "staging_stop"}
INTERVAL_ENDS = {stop: start for start, stop in INTERVALS.items()}
TRAINING_KEYS = ("block_start", "block_stop", "epoch_start", "epoch_stop", "eval_start",
                 "eval_stop", "eval_accuracy")

LARS_MOMENTUM_FIXED_BELOW_BATCH = 32 * 1024  # training_rules.adoc: 0.9 for batch < 32k


class Event:
    """One parsed `:::MLLOG` line; `line` is its 1-based line number in the file."""

    def __init__(self, line, obj):
        self.line = line
        self.time_ms = obj.get("time_ms")
        self.event_type = obj.get("event_type")
        self.key = obj.get("key")
        self.value = obj.get("value")
        metadata = obj.get("metadata")
        self.metadata = metadata if isinstance(metadata, dict) else {}

    def where(self):
        return "line {} ({})".format(self.line, self.key)


class Findings:
    """Collects errors, warnings (--strict files them as errors) and notes (never fatal)."""

    def __init__(self, strict, context):
        self.strict = strict
        self.context = context
        self.errors = []
        self.warnings = []
        self.notes = []

    def _format(self, where, message, origin):
        division = self.context.get("division")
        origin = origin.format(rs=self.context.get("rs"),
                               division=division if division in ("closed", "open")
                               else "{closed,open}")
        return "{}: {} [{}]".format(where, message, origin) if where else \
            "{} [{}]".format(message, origin)

    def error(self, where, message, origin):
        self.errors.append(self._format(where, message, origin))

    def warning(self, where, message, origin):
        target = self.errors if self.strict else self.warnings
        target.append(self._format(where, message, origin))

    def note(self, where, message, origin):
        self.notes.append(self._format(where, message, origin))


# ---------------------------------------------------------------------------------------------
# Value predicates: each returns None when the value is fine, else what is wrong with it.

def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def is_whole(v):
    return is_number(v) and float(v).is_integer()


def close_to_integer(x):
    # The official checker's is_integer(): within 1e-5 of a whole number.
    return abs(round(x) - x) < 0.00001


def number():
    return lambda v: None if is_number(v) else "is {!r}, not a number".format(v)


def greater_than(bound):
    return lambda v: None if is_number(v) and v > bound else \
        "is {!r}, not a number > {}".format(v, bound)


def at_least(bound):
    return lambda v: None if is_number(v) and v >= bound else \
        "is {!r}, not a number >= {}".format(v, bound)


def positive_integer():
    return lambda v: None if is_whole(v) and v > 0 else "is {!r}, not an integer > 0".format(v)


def whole_at_least_zero():
    return lambda v: None if is_whole(v) and v >= 0 else "is {!r}, not an integer >= 0".format(v)


def integer():
    return lambda v: None if isinstance(v, int) and not isinstance(v, bool) else \
        "is {!r}, not an integer".format(v)


def non_empty_string():
    return lambda v: None if isinstance(v, str) and v.strip() else \
        "is {!r}, not a non-empty string".format(v)


def one_of(*allowed):
    return lambda v: None if v in allowed else \
        "is {!r}; allowed: {}".format(v, ", ".join(repr(a) for a in allowed))


def equals(expected):
    return lambda v: None if is_number(v) and v == expected else \
        "is {!r}; the reference fixes it at {!r}".format(v, expected)


def multiple_of(step):
    return lambda v: None if is_number(v) and v > 0 and close_to_integer(v / step) else \
        "is {!r}, not a positive multiple of {}".format(v, step)


def power_of_two_times(base):
    def check(v):
        if is_number(v) and v > 0 and close_to_integer(math.log2(v / base)):
            return None
        return "is {!r}, not {} * 2^N for an integer N".format(v, base)
    return check


def lars_momentum(ctx):
    # training_rules.adoc: lars_opt_momentum is 0.9 below a global batch of 32k, free above.
    def check(v):
        batch = ctx.get("global_batch_size")
        if is_number(batch) and batch < LARS_MOMENTUM_FIXED_BELOW_BATCH and v != 0.9:
            return "is {!r}; it must be 0.9 for a global batch below {}".format(
                v, LARS_MOMENTUM_FIXED_BELOW_BATCH)
        return None
    return check


# ---------------------------------------------------------------------------------------------
# When a rule applies. ctx holds the benchmark, the ruleset profile, and the division, opt_name
# and global_batch_size read from the log.

def always(ctx):
    return True


def closed(ctx):
    return ctx["division"] == "closed"


def closed_sgd(ctx):
    return closed(ctx) and ctx["opt_name"] == "sgd"


def closed_lars(ctx):
    return closed(ctx) and ctx["opt_name"] == "lars"


def closed_grad_accum(ctx):
    return closed(ctx) and ctx["profile"]["grad_accum"]


def closed_weights_init(ctx):
    return closed(ctx) and ctx["profile"]["weights_init"]


ONCE, AT_LEAST_ONCE = "exactly once", "at least once"

# Keys and how often they must appear: (key, count, applies when, origin). Those of every
# benchmark, then each benchmark's (REQUIRED_KEYS).
COMMON_REQUIRED_KEYS = [
    ("submission_benchmark", ONCE, always, DIVISION_COMMON),
    ("submission_org", ONCE, always, COMMON),
    ("submission_platform", ONCE, always, COMMON),
    ("submission_division", ONCE, always, COMMON),
    ("submission_status", ONCE, always, COMMON),
    ("cache_clear", AT_LEAST_ONCE, always, COMMON),
    ("init_start", AT_LEAST_ONCE, always, COMMON),
    ("init_stop", ONCE, always, COMMON),
    ("run_start", ONCE, always, COMMON),
    ("run_stop", ONCE, always, COMMON),
    ("train_samples", ONCE, always, COMMON),
    ("eval_samples", ONCE, always, COMMON),
    ("eval_accuracy", AT_LEAST_ONCE, always, COMMON),
    ("gradient_accumulation_steps", ONCE, closed_grad_accum, CLOSED_COMMON),
]

RESNET_REQUIRED_KEYS = [
    ("global_batch_size", ONCE, closed, CLOSED_RESNET),
    ("opt_name", ONCE, closed, CLOSED_RESNET),
    ("seed", AT_LEAST_ONCE, closed, SEED_RULES),
    ("weights_initialization", AT_LEAST_ONCE, closed_weights_init, CLOSED_RESNET),
    ("sgd_opt_base_learning_rate", ONCE, closed_sgd, SGD_RULES),
    ("sgd_opt_end_learning_rate", ONCE, closed_sgd, SGD_RULES),
    ("sgd_opt_learning_rate_decay_poly_power", ONCE, closed_sgd, SGD_RULES),
    ("sgd_opt_learning_rate_decay_steps", ONCE, closed_sgd, SGD_RULES),
    ("sgd_opt_weight_decay", ONCE, closed_sgd, SGD_RULES),
    ("sgd_opt_momentum", ONCE, closed_sgd, SGD_RULES),
    ("model_bn_span", ONCE, closed_sgd, SGD_RULES),
    ("opt_learning_rate_warmup_epochs", ONCE, closed_sgd, SGD_RULES),
    ("lars_opt_base_learning_rate", ONCE, closed_lars, LARS_RULES),
    ("lars_opt_end_learning_rate", ONCE, closed_lars, LARS_RULES),
    ("lars_opt_learning_rate_decay_poly_power", ONCE, closed_lars, LARS_RULES),
    ("lars_opt_learning_rate_decay_steps", ONCE, closed_lars, LARS_RULES),
    ("lars_epsilon", ONCE, closed_lars, LARS_RULES),
    ("lars_opt_learning_rate_warmup_epochs", ONCE, closed_lars, LARS_RULES),
    ("lars_opt_momentum", ONCE, closed_lars, LARS_RULES),
    ("lars_opt_weight_decay", ONCE, closed_lars, LARS_RULES),
]

# closed_transformer.yaml (training_0.7.0): every key EXACTLY_ONE, whatever opt_name says (it
# enqueues no per-optimizer file). open_transformer.yaml asks only for eval_accuracy.
TRANSFORMER_REQUIRED_KEYS = [
    ("global_batch_size", ONCE, closed, CLOSED_TRANSFORMER),
    ("opt_name", ONCE, closed, CLOSED_TRANSFORMER),
    ("seed", AT_LEAST_ONCE, closed, SEED_RULES),
    ("opt_base_learning_rate", ONCE, closed, CLOSED_TRANSFORMER),
    ("opt_learning_rate_warmup_steps", ONCE, closed, CLOSED_TRANSFORMER),
    ("opt_adam_beta_1", ONCE, closed, CLOSED_TRANSFORMER),
    ("opt_adam_beta_2", ONCE, closed, CLOSED_TRANSFORMER),
    ("opt_adam_epsilon", ONCE, closed, CLOSED_TRANSFORMER),
    ("max_sequence_length", ONCE, closed, CLOSED_TRANSFORMER),
]

REQUIRED_KEYS = {
    "resnet": COMMON_REQUIRED_KEYS + RESNET_REQUIRED_KEYS,
    "transformer": COMMON_REQUIRED_KEYS + TRANSFORMER_REQUIRED_KEYS,
}

# At least one key of each group (common.yaml REQ: AT_LEAST_ONE_OR(...)).
REQUIRED_ONE_OF = [
    ("block_start", "epoch_start"),
    ("block_stop", "epoch_stop"),
    ("eval_start", "block_start"),
    ("eval_stop", "block_stop"),
]

ERROR, WARNING = "error", "warning"


def value_rules(ctx):
    """What each key's value must be: (key, applies when, predicate, severity, origin).
    Errors for what every log must satisfy, warnings for the values the closed division fixes
    to the reference's. The rules of every benchmark, then the benchmark's own."""
    common = [
        # {division}_common.yaml accepts any benchmark of the round; a log checked against one
        # benchmark's rules must name that benchmark.
        ("submission_benchmark", always, one_of(ctx["benchmark"]), ERROR, DIVISION_COMMON),
        ("submission_org", always, non_empty_string(), ERROR, COMMON),
        ("submission_platform", always, non_empty_string(), ERROR, COMMON),
        ("submission_division", always, one_of("closed", "open"), ERROR, COMMON),
        ("submission_status", always, one_of("cloud", "onprem", "preview", "research"),
         ERROR, COMMON),
        ("cache_clear", always, one_of(True), WARNING, "training_0.6.0/common.yaml"),
        ("train_samples", always, positive_integer(), ERROR, COMMON + "; a sample count"),
        ("eval_samples", always, positive_integer(), ERROR, COMMON + "; a sample count"),
        ("gradient_accumulation_steps", always, positive_integer(), ERROR, CLOSED_COMMON),
    ]
    if ctx["benchmark"] == "transformer":
        return common + transformer_value_rules()
    return common + resnet_value_rules(ctx)


def resnet_value_rules(ctx):
    return [
        ("global_batch_size", always, positive_integer(), ERROR, CLOSED_RESNET),
        ("opt_name", always, one_of("sgd", "lars"), ERROR, CLOSED_RESNET),
        ("seed", always, integer(), ERROR, SEED_RULES),
        # closed_resnet_sgd.yaml, with training_rules.adoc's constraints for the unchecked ones
        ("sgd_opt_base_learning_rate", closed_sgd, number(), ERROR, SGD_RULES),
        ("sgd_opt_base_learning_rate", closed_sgd, multiple_of(0.001), WARNING, SGD_RULES),
        ("sgd_opt_end_learning_rate", closed_sgd, equals(0.0001), WARNING, SGD_RULES),
        ("sgd_opt_learning_rate_decay_poly_power", closed_sgd, number(), ERROR, SGD_RULES),
        ("sgd_opt_learning_rate_decay_poly_power", closed_sgd, equals(2), WARNING, POLICIES),
        ("sgd_opt_learning_rate_decay_steps", closed_sgd, whole_at_least_zero(), WARNING,
         POLICIES),
        ("sgd_opt_weight_decay", closed_sgd, power_of_two_times(0.0001), WARNING, SGD_RULES),
        ("sgd_opt_momentum", closed_sgd, number(), ERROR, SGD_RULES),
        ("sgd_opt_momentum", closed_sgd, equals(0.9), WARNING, POLICIES),
        ("model_bn_span", closed_sgd, positive_integer(), ERROR, SGD_RULES),
        ("opt_learning_rate_warmup_epochs", closed_sgd, whole_at_least_zero(), WARNING,
         POLICIES),
        # closed_resnet_lars.yaml
        ("lars_opt_base_learning_rate", closed_lars, number(), ERROR, LARS_RULES),
        ("lars_opt_end_learning_rate", closed_lars, equals(0.0001), WARNING, LARS_RULES),
        ("lars_opt_learning_rate_decay_poly_power", closed_lars, equals(2), WARNING, LARS_RULES),
        ("lars_opt_learning_rate_decay_steps", closed_lars, number(), ERROR, LARS_RULES),
        ("lars_epsilon", closed_lars, equals(0.0), WARNING, LARS_RULES),
        ("lars_opt_learning_rate_warmup_epochs", closed_lars, number(), ERROR, LARS_RULES),
        ("lars_opt_momentum", closed_lars, number(), ERROR, LARS_RULES),
        ("lars_opt_momentum", closed_lars, lars_momentum(ctx), WARNING, POLICIES),
        ("lars_opt_weight_decay", closed_lars, power_of_two_times(0.0001), WARNING, LARS_RULES),
    ]


def transformer_value_rules():
    """closed_transformer.yaml's CHECKs (training_0.7.0), in the closed division only:
    open_transformer.yaml checks no hyper-parameter (training_rules.adoc, OPEN: "Hyperparameters
    and optimizer may be freely changed"). opt_adam_epsilon is the one value fixed to the
    reference (training_rules.adoc: "fixed to reference"; the yaml: == 1e-09), a warning like
    ResNet's fixed values; the others are "arbitrary constant" there. max_sequence_length's
    metadata.method: METADATA_RULES."""
    return [
        ("global_batch_size", closed, greater_than(0), ERROR, CLOSED_TRANSFORMER),
        ("opt_name", closed, one_of("adam", "lazy_adam"), ERROR, CLOSED_TRANSFORMER),
        ("seed", always, integer(), ERROR, SEED_RULES),
        ("opt_base_learning_rate", closed, greater_than(0), ERROR, CLOSED_TRANSFORMER),
        ("opt_learning_rate_warmup_steps", closed, at_least(0), ERROR, CLOSED_TRANSFORMER),
        ("opt_adam_beta_1", closed, at_least(0), ERROR, CLOSED_TRANSFORMER),
        ("opt_adam_beta_2", closed, at_least(0), ERROR, CLOSED_TRANSFORMER),
        ("opt_adam_epsilon", closed, number(), ERROR, CLOSED_TRANSFORMER),
        ("opt_adam_epsilon", closed, equals(1e-9), WARNING,
         CLOSED_TRANSFORMER + "; " + POLICIES),
        ("max_sequence_length", closed, greater_than(0), ERROR, CLOSED_TRANSFORMER),
    ]


def closed_transformer(ctx):
    return ctx["benchmark"] == "transformer" and closed(ctx)


# What a key's metadata must hold: (key, metadata field, applies when, allowed values, origin).
# closed_transformer.yaml: "'method' in v['metadata']" and "v['metadata']['method'] in
# ['truncate', 'discard']"; training_rules.adoc ("Data Representation", CLOSED): sequences are
# either truncated to length N or those longer than N thrown out, uniformly.
METADATA_RULES = [
    ("max_sequence_length", "method", closed_transformer, ("truncate", "discard"),
     CLOSED_TRANSFORMER + "; " + POLICIES),
]


# ---------------------------------------------------------------------------------------------
# Reading the file.

def reject_non_json_constant(name):
    # Python's json reads NaN and Infinity, which are not JSON and which no checker can compare.
    raise ValueError("{} is not valid JSON".format(name))


def check_line_fields(line_no, obj, findings):
    """The object mllog.py's _encode_log() writes: six fields, metadata with file and lineno."""
    where = "line {}".format(line_no)
    missing = [f for f in LINE_FIELDS if f not in obj]
    if missing:
        findings.error(where, "missing field(s) {}".format(", ".join(missing)), MLLOG_FORMAT)
    extra = sorted(set(obj) - set(LINE_FIELDS))
    if extra:
        findings.note(where, "unexpected field(s) {}".format(", ".join(extra)), MLLOG_FORMAT)
    if "namespace" in obj and not isinstance(obj["namespace"], str):
        findings.error(where, "namespace is {!r}, not a string".format(obj["namespace"]),
                       MLLOG_FORMAT)
    if "key" in obj and not (isinstance(obj["key"], str) and obj["key"]):
        findings.error(where, "key is {!r}, not a non-empty string".format(obj["key"]),
                       MLLOG_FORMAT)
    if "event_type" in obj and obj["event_type"] not in EVENT_TYPES:
        findings.error(where, "event_type is {!r}; allowed: {}".format(
            obj["event_type"], ", ".join(EVENT_TYPES)), MLLOG_FORMAT)
    check_time_field(where, obj, findings)
    check_metadata_field(where, obj, findings)


def check_time_field(where, obj, findings):
    if "time_ms" not in obj:
        return
    t = obj["time_ms"]
    if not is_number(t):
        findings.error(where, "time_ms is {!r}, not a number".format(t), MLLOG_FORMAT)
    elif not 1e12 <= t < 1e14:
        # int(time.time() * 1e3) is 13 digits from 2001 on; seconds or microseconds are not.
        findings.error(where, "time_ms {!r} is not wall-clock milliseconds since the epoch"
                       .format(t), MLLOG_FORMAT)


def check_metadata_field(where, obj, findings):
    if "metadata" not in obj:
        return
    md = obj["metadata"]
    if not isinstance(md, dict):
        findings.error(where, "metadata is {!r}, not an object".format(md), MLLOG_FORMAT)
        return
    if not isinstance(md.get("file"), str):
        findings.error(where, "metadata.file is missing or not a string", MLLOG_FORMAT)
    lineno = md.get("lineno")
    if not (isinstance(lineno, int) and not isinstance(lineno, bool) and lineno >= 0):
        findings.error(where, "metadata.lineno is {!r}, not an integer >= 0".format(lineno),
                       MLLOG_FORMAT)


def parse_log(text, findings):
    """Returns the events of every line holding `:::MLLOG `. Text before the token and other
    lines are tolerated, as the official parser strips and skips them (an MPI launcher's rank
    prefix, a package's :::SYSJSON line), but noted: scaletrain's rank 0 writes the file
    itself."""
    events, ignored = [], []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        pos = raw.find(TOKEN)
        if pos < 0:
            if raw.strip():
                ignored.append(line_no)
            continue
        if pos > 0:
            findings.note("line {}".format(line_no), "text before ':::MLLOG '", MLLOG_FORMAT)
        event = parse_line(line_no, raw[pos + len(TOKEN):], findings)
        if event is not None:
            events.append(event)
    if ignored:
        findings.note("", "{} non-empty line(s) without ':::MLLOG ' were ignored, the first "
                         "at line {}".format(len(ignored), ignored[0]), MLLOG_FORMAT)
    return events


def parse_line(line_no, payload, findings):
    where = "line {}".format(line_no)
    try:
        obj = json.loads(payload, parse_constant=reject_non_json_constant)
    except ValueError as exc:
        findings.error(where, "not valid JSON after ':::MLLOG ': {}".format(exc), MLLOG_FORMAT)
        return None
    if not isinstance(obj, dict):
        findings.error(where, "the JSON after ':::MLLOG ' is not an object", MLLOG_FORMAT)
        return None
    check_line_fields(line_no, obj, findings)
    # Later checks need a key and a time; a line without them has been reported already.
    if not (isinstance(obj.get("key"), str) and is_number(obj.get("time_ms"))):
        return None
    return Event(line_no, obj)


# ---------------------------------------------------------------------------------------------
# Whole-log checks.

def by_key(events):
    index = {}
    for ev in events:
        index.setdefault(ev.key, []).append(ev)
    return index


def first_value(index, key):
    return index[key][0].value if key in index else None


def check_time_order(events, findings):
    """One writer, one clock: time_ms never goes back (run_stop - run_start is the score)."""
    for before, after in zip(events, events[1:]):
        if after.time_ms < before.time_ms:
            findings.error(after.where(), "time_ms {} is earlier than line {}'s {}".format(
                after.time_ms, before.line, before.time_ms), STRICTER)


def check_event_types(events, ctx, findings):
    """mllog writes start() as INTERVAL_START, end() as INTERVAL_END, event() as POINT_IN_TIME."""
    known_events = {k for k, _, _, _ in REQUIRED_KEYS[ctx["benchmark"]] if k not in INTERVALS}
    for ev in events:
        if ev.key in INTERVALS:
            expected = "INTERVAL_START"
        elif ev.key in INTERVAL_ENDS:
            expected = "INTERVAL_END"
        elif ev.key in known_events or ev.key in TRAINING_KEYS:
            expected = "POINT_IN_TIME"
        else:
            continue
        if ev.event_type in EVENT_TYPES and ev.event_type != expected:
            findings.error(ev.where(), "event_type is {}; {} is logged as {}".format(
                ev.event_type, ev.key, expected), MLLOG_FORMAT + "; " + STRICTER)


def check_counts(index, ctx, findings):
    for key, count, applies, origin in REQUIRED_KEYS[ctx["benchmark"]]:
        if not applies(ctx):
            continue
        found = index.get(key, [])
        if not found:
            findings.error("", "'{}' is missing; it must appear {}".format(key, count), origin)
        elif count == ONCE and len(found) > 1:
            findings.error("", "'{}' appears {} times (lines {}); it must appear exactly once"
                           .format(key, len(found), ", ".join(str(e.line) for e in found)),
                           origin + "; " + STRICTER)
    for group in REQUIRED_ONE_OF:
        if not any(k in index for k in group):
            findings.error("", "none of {} appears; at least one must".format(
                " or ".join("'{}'".format(k) for k in group)), COMMON)


def check_values(index, ctx, findings):
    for key, applies, predicate, severity, origin in value_rules(ctx):
        if not applies(ctx):
            continue
        for ev in index.get(key, []):
            problem = predicate(ev.value)
            if problem:
                report = findings.error if severity == ERROR else findings.warning
                report(ev.where(), "value " + problem, origin)


def check_metadata(index, ctx, findings):
    for key, field, applies, allowed, origin in METADATA_RULES:
        if not applies(ctx):
            continue
        for ev in index.get(key, []):
            if field not in ev.metadata:
                findings.error(ev.where(), "metadata.{} is missing; allowed: {}".format(
                    field, ", ".join(repr(a) for a in allowed)), origin)
            elif ev.metadata[field] not in allowed:
                findings.error(ev.where(), "metadata.{} is {!r}; allowed: {}".format(
                    field, ev.metadata[field], ", ".join(repr(a) for a in allowed)), origin)


def check_weights_initialization(index, ctx, findings):
    """closed_resnet.yaml of 1.1.0-2.1.0 (no Transformer ruleset asks for these lines)."""
    if ctx["benchmark"] != "resnet" or not closed_weights_init(ctx):
        return
    for ev in index.get("weights_initialization", []):
        if not isinstance(ev.metadata.get("tensor"), str):
            findings.error(ev.where(), "metadata.tensor (the tensor's name) is missing",
                           CLOSED_RESNET)


def check_seed_count(index, ctx, findings):
    seeds = index.get("seed", [])
    if closed(ctx) and len(seeds) > 1:
        findings.warning("", "'seed' is logged {} times; one seed per run is expected".format(
            len(seeds)), SEED_RULES)


# ---------------------------------------------------------------------------------------------
# Initialisation and the timed run.

def check_run_phases(index, ctx, findings):
    """init_start .. init_stop, then run_start .. run_stop (common.yaml's CHECKs)."""
    init_starts = index.get("init_start", [])
    init_stop = index.get("init_stop", [None])[0]
    run_start = index.get("run_start", [None])[0]
    run_stop = index.get("run_stop", [None])[0]
    for ev in init_starts:
        for later in (init_stop, run_start):
            if later is not None and ev.line > later.line:
                findings.error(ev.where(), "init_start after {} (line {})".format(
                    later.key, later.line), COMMON)
    if init_stop and init_starts and init_stop.line < init_starts[0].line:
        findings.error(init_stop.where(), "init_stop before any init_start", COMMON)
    if init_stop and run_start and run_start.line < init_stop.line:
        findings.error(run_start.where(), "run_start before init_stop (line {})".format(
            init_stop.line), COMMON)
    if run_start and run_stop:
        if run_stop.line < run_start.line:
            findings.error(run_stop.where(), "run_stop before run_start (line {})".format(
                run_start.line), COMMON)
        elif run_stop.time_ms <= run_start.time_ms:
            findings.error(run_stop.where(), "run_stop.time_ms {} is not after run_start's {}"
                           .format(run_stop.time_ms, run_start.time_ms), STRICTER)
    check_init_time(init_starts, init_stop, ctx, findings)
    check_cache_clear_first(index, findings)


def check_init_time(init_starts, init_stop, ctx, findings):
    if not (init_starts and init_stop) or ctx["division"] not in ("closed", "open"):
        return
    limit_min = ctx["profile"]["init_limit_min"][ctx["division"]]
    used_ms = init_stop.time_ms - min(ev.time_ms for ev in init_starts)
    if used_ms >= limit_min * 60 * 1000:
        findings.warning(init_stop.where(), "initialisation took {:.1f} min; the {} division "
                         "allows {} min from the first init_start".format(
                             used_ms / 60000.0, ctx["division"], limit_min), COMMON)


def check_cache_clear_first(index, findings):
    """training_0.6.0/common.yaml: the cache is cleared (cache_clear: true) before init_start."""
    cache_clears = index.get("cache_clear", [])
    inits = index.get("init_start", [])
    if cache_clears and inits and cache_clears[0].line > inits[0].line:
        findings.warning(cache_clears[0].where(), "cache_clear after init_start (line {}); the "
                         "cache is cleared before the run begins".format(inits[0].line),
                         "training_0.6.0/common.yaml")


def check_run_stop_status(index, findings):
    run_stop = index.get("run_stop", [None])[0]
    if run_stop is None:
        return None
    status = run_stop.metadata.get("status")
    if status not in RUN_STOP_STATUSES:
        allowed = ", ".join(repr(s) for s in RUN_STOP_STATUSES)
        findings.error(run_stop.where(), "metadata.status is {!r}; allowed: {}".format(
            status, allowed), COMMON + "; mllog/constants.py")
        return None
    return status


# ---------------------------------------------------------------------------------------------
# Blocks, epochs and evaluations.

class TrainingState:
    """Where the training loop is while the events are replayed in order; `rules` is the
    benchmark's BENCHMARK_RULES entry."""

    def __init__(self, rules):
        self.rules = rules
        self.run_started = False
        self.run_stopped = False
        self.block = None        # the open block_start event
        self.epoch = None        # the open epoch_start event
        self.eval = None         # the open eval_start event
        self.last_epoch = 0      # highest epoch_num started (or, without epoch_start, run)
        self.saw_epoch_start = False
        self.eval_epochs = []    # (epoch_num, event) of each eval_accuracy
        self.last_eval_epoch = 0
        self.uses_eval_start = False
        self.last_training_key = None


def epoch_metadata(ev, name, findings, origin):
    """An epoch counter in metadata: a whole number >= 1 (training_rules.adoc: epochs are
    numbered from 1; ResNet and the Transformer both count their training in epochs)."""
    v = ev.metadata.get(name)
    if v is None:
        findings.error(ev.where(), "metadata.{} is missing".format(name), origin)
        return None
    if not (is_whole(v) and v >= 1):
        findings.error(ev.where(), "metadata.{} is {!r}, not a whole epoch number >= 1".format(
            name, v), POLICIES)
        return None
    return int(v)


def on_block_start(ev, st, findings):
    if st.block is not None:
        findings.error(ev.where(), "block_start while the block of line {} is open".format(
            st.block.line), COMMON + "; " + STRICTER)
    first = epoch_metadata(ev, "first_epoch_num", findings, COMMON)
    count = ev.metadata.get("epoch_count")
    if count is None:
        findings.error(ev.where(), "metadata.epoch_count is missing", COMMON)
    elif not (is_whole(count) and count > 0):
        findings.error(ev.where(), "metadata.epoch_count is {!r}, not an integer > 0".format(
            count), COMMON)
    if first is not None and st.epoch is None and first != st.last_epoch + 1:
        findings.error(ev.where(), "first_epoch_num {} but the next epoch is {}".format(
            first, st.last_epoch + 1), "training_0.6.0/common.yaml; " + STRICTER)
    st.block = ev


def on_block_stop(ev, st, findings):
    first = epoch_metadata(ev, "first_epoch_num", findings, COMMON)
    if st.block is None:
        findings.error(ev.where(), "block_stop without an open block_start", STRICTER)
        return
    opened = st.block.metadata.get("first_epoch_num")
    if first is not None and first != opened:
        findings.error(ev.where(), "first_epoch_num {} does not match block_start's {} "
                       "(line {})".format(first, opened, st.block.line),
                       "training_0.6.0/common.yaml")
    if st.epoch is not None:
        findings.error(ev.where(), "block_stop while epoch {} (line {}) is open".format(
            st.epoch.metadata.get("epoch_num"), st.epoch.line), STRICTER)
    st.last_epoch = epochs_reached(st)
    st.block = None


def on_epoch_start(ev, st, findings):
    num = epoch_metadata(ev, "epoch_num", findings, COMMON)
    if st.epoch is not None:
        findings.error(ev.where(), "epoch_start while epoch {} (line {}) is open".format(
            st.epoch.metadata.get("epoch_num"), st.epoch.line), "training_0.6.0/common.yaml")
    if num is not None and num != st.last_epoch + 1:
        findings.error(ev.where(), "epoch_num {} follows epoch {}; epochs count 1, 2, 3, ..."
                       .format(num, st.last_epoch), POLICIES + "; training_0.6.0/common.yaml")
    if num is not None and st.block is not None:
        check_epoch_in_block(ev, num, st.block, findings)
    if num is not None:
        st.last_epoch = max(st.last_epoch, num)
    st.saw_epoch_start = True
    st.epoch = ev


def check_epoch_in_block(ev, num, block, findings):
    first = block.metadata.get("first_epoch_num")
    count = block.metadata.get("epoch_count")
    if is_whole(first) and is_whole(count) and not first <= num < first + count:
        findings.error(ev.where(), "epoch {} is outside the block of line {} (epochs {}..{})"
                       .format(num, block.line, int(first), int(first + count - 1)),
                       COMMON + " (epoch_count); " + STRICTER)


def on_epoch_stop(ev, st, findings):
    num = epoch_metadata(ev, "epoch_num", findings, COMMON)
    if st.epoch is None:
        findings.error(ev.where(), "epoch_stop without an open epoch_start", STRICTER)
        return
    opened = st.epoch.metadata.get("epoch_num")
    if num is not None and num != opened:
        findings.error(ev.where(), "epoch_num {} does not match epoch_start's {} (line {})"
                       .format(num, opened, st.epoch.line), "training_0.6.0/common.yaml")
    st.epoch = None


def on_eval_start(ev, st, findings):
    st.uses_eval_start = True
    num = epoch_metadata(ev, "epoch_num", findings, COMMON)
    if st.eval is not None:
        findings.error(ev.where(), "eval_start while the evaluation of line {} is open".format(
            st.eval.line), "training_0.6.0/common.yaml")
    if num is not None:
        check_eval_epoch(ev, num, st, findings)
        st.last_eval_epoch = num
    st.eval = ev


def epochs_reached(st):
    """The highest epoch training has reached. A log that marks blocks but no epochs has reached
    the last epoch of its open block."""
    if st.saw_epoch_start or st.block is None:
        return st.last_epoch
    first = st.block.metadata.get("first_epoch_num")
    count = st.block.metadata.get("epoch_count")
    if is_whole(first) and is_whole(count):
        return max(st.last_epoch, int(first + count - 1))
    return st.last_epoch


def check_eval_epoch(ev, num, st, findings):
    reached = epochs_reached(st)
    if num > reached:
        findings.error(ev.where(), "evaluates epoch {} but training has reached epoch {}"
                       .format(num, reached), "training_0.6.0/common.yaml")
    if num <= st.last_eval_epoch:
        findings.error(ev.where(), "evaluates epoch {} after epoch {} was already evaluated"
                       .format(num, st.last_eval_epoch), "training_0.6.0/common.yaml")


def on_eval_stop(ev, st, findings):
    num = epoch_metadata(ev, "epoch_num", findings, COMMON)
    if st.eval is None:
        findings.error(ev.where(), "eval_stop without an open eval_start", STRICTER)
        return
    opened = st.eval.metadata.get("epoch_num")
    if num is not None and num != opened:
        findings.error(ev.where(), "epoch_num {} does not match eval_start's {} (line {})"
                       .format(num, opened, st.eval.line), "training_0.6.0/common.yaml")
    st.eval = None


def on_eval_accuracy(ev, st, findings):
    """{division}_<benchmark>.yaml: metadata.epoch_num; the value is ResNet's top-1 accuracy or
    the Transformer's BLEU / 100, both in [0, 1]."""
    num = epoch_metadata(ev, "epoch_num", findings, st.rules["epoch_num_origin"])
    if not (is_number(ev.value) and 0.0 <= ev.value <= 1.0):
        findings.error(ev.where(), "value {!r} is not {}".format(ev.value, st.rules["metric"]),
                       st.rules["accuracy_origin"])
    if num is None:
        return
    if st.uses_eval_start:
        if num != st.last_eval_epoch:
            findings.error(ev.where(), "epoch_num {} but the last evaluation was of epoch {}"
                           .format(num, st.last_eval_epoch), "training_0.6.0/common.yaml")
    else:
        check_eval_epoch(ev, num, st, findings)
        st.last_eval_epoch = num
    st.eval_epochs.append((num, ev))


TRAINING_HANDLERS = {
    "block_start": on_block_start, "block_stop": on_block_stop,
    "epoch_start": on_epoch_start, "epoch_stop": on_epoch_stop,
    "eval_start": on_eval_start, "eval_stop": on_eval_stop,
    "eval_accuracy": on_eval_accuracy,
}


def check_training_loop(events, status, rules, findings):
    """Replays the run: training keys only between run_start and run_stop, blocks, epochs and
    evaluations properly opened and closed, epochs counted from 1. Every check here holds for
    both benchmarks (common.yaml, training_rules.adoc's epoch numbering); what differs by
    benchmark is eval_accuracy's origin and meaning (`rules`) and, after the replay,
    check_eval_schedule and check_target_accuracy."""
    st = TrainingState(rules)
    for ev in events:
        if ev.key == "run_start":
            st.run_started = True
        elif ev.key == "run_stop" and st.run_started and not st.run_stopped:
            check_open_intervals_at_stop(ev, st, status, findings)
            st.run_stopped = True
        elif ev.key in TRAINING_HANDLERS:
            if not st.run_started or st.run_stopped:
                findings.error(ev.where(), "{} outside run_start .. run_stop".format(ev.key),
                               COMMON + "; training_0.6.0/common.yaml")
            TRAINING_HANDLERS[ev.key](ev, st, findings)
            st.last_training_key = ev.key
    return st


def check_open_intervals_at_stop(run_stop, st, status, findings):
    """An aborted run may stop anywhere. A successful one may stop inside a block or epoch only
    right after the evaluation that reached the target (common.yaml: "if eval is inside epoch
    and we decide to terminate, we can lack epoch_stop, it is ok")."""
    open_ones = [ev for ev in (st.block, st.epoch, st.eval) if ev is not None]
    if not open_ones or status == "aborted":
        return
    if st.eval is None and st.last_training_key == "eval_accuracy":
        return
    findings.error(run_stop.where(), "run_stop with {} still open".format(", ".join(
        "{} of line {}".format(ev.key, ev.line) for ev in open_ones)), COMMON)


def check_eval_schedule(st, findings):
    """training_rules.adoc, "Quality measure", the evaluation frequency of each benchmark:
    ResNet evaluates every 4 epochs with an offset of 0, 1, 2 or 3, so the first evaluation is
    of epoch 1..4 and the next ones 4 epochs apart; the Transformer evaluates every epoch, so
    epochs 1, 2, 3, ..."""
    every = st.rules["eval_every_epochs"]
    if not st.eval_epochs:
        return
    first_num, first_ev = st.eval_epochs[0]
    if first_num > every:
        findings.warning(first_ev.where(), "first evaluation at epoch {}; it must be at epoch "
                         "{}".format(first_num, st.rules["first_eval"]), POLICIES)
    for (prev, _), (num, ev) in zip(st.eval_epochs, st.eval_epochs[1:]):
        if num - prev != every:
            findings.warning(ev.where(), "evaluation at epoch {} follows epoch {}; {}".format(
                num, prev, st.rules["schedule"]), POLICIES)


def check_target_accuracy(index, status, ctx, findings):
    """The ATLEAST_ONE_CHECK of eval_accuracy: closed_resnet.yaml wants one in [0.759, 1.0),
    open_resnet.yaml one < 1.0; closed_transformer.yaml and open_transformer.yaml one in
    [0.25, 1). Only a successful run claims the target; an aborted one is recorded as such."""
    if status != "success":
        return
    rules = BENCHMARK_RULES[ctx["benchmark"]]
    origin = rules["accuracy_origin"]
    values = [ev.value for ev in index.get("eval_accuracy", []) if is_number(ev.value)]
    target = rules["target"].get(ctx["division"])
    if target is not None and not any(target <= v < 1.0 for v in values):
        findings.warning("", "run_stop says success but no eval_accuracy " + rules[
            "missed_target"].format(target=target, best=max(values) if values else None),
            origin)
    if ctx["division"] == "open" and target is None and not any(v < 1.0 for v in values):
        findings.warning("", "no eval_accuracy below 1.0", origin)


# ---------------------------------------------------------------------------------------------

def make_context(index, ruleset, benchmark):
    division = first_value(index, "submission_division")
    return {
        "benchmark": benchmark,
        "profile": RULESETS[ruleset],
        "rs": RULESETS[ruleset]["dir"],
        "division": division if division in ("closed", "open") else "?",
        "opt_name": first_value(index, "opt_name"),
        "global_batch_size": first_value(index, "global_batch_size"),
    }


def check_log(text, ruleset, strict, benchmark="resnet"):
    """Returns (findings, summary) for the log's text, checked against the benchmark's rules."""
    findings = Findings(strict, {"rs": RULESETS[ruleset]["dir"]})
    events = parse_log(text, findings)
    index = by_key(events)
    ctx = make_context(index, ruleset, benchmark)
    findings.context = ctx
    if not events:
        findings.error("", "no ':::MLLOG ' lines", MLLOG_FORMAT)
        return findings, {}
    check_time_order(events, findings)
    check_event_types(events, ctx, findings)
    check_counts(index, ctx, findings)
    check_values(index, ctx, findings)
    check_metadata(index, ctx, findings)
    check_weights_initialization(index, ctx, findings)
    check_seed_count(index, ctx, findings)
    check_run_phases(index, ctx, findings)
    status = check_run_stop_status(index, findings)
    st = check_training_loop(events, status, BENCHMARK_RULES[benchmark], findings)
    check_eval_schedule(st, findings)
    check_target_accuracy(index, status, ctx, findings)
    return findings, summarize(index, ctx, st, status)


def summarize(index, ctx, st, status):
    accuracies = [ev.value for ev in index.get("eval_accuracy", []) if is_number(ev.value)]
    run_start = index.get("run_start", [None])[0]
    run_stop = index.get("run_stop", [None])[0]
    summary = {
        "division": ctx["division"], "opt_name": ctx["opt_name"], "epochs": st.last_epoch,
        "evals": len(st.eval_epochs), "status": status,
        "best_eval_accuracy": max(accuracies) if accuracies else None,
    }
    if run_start and run_stop:
        summary["run_s"] = (run_stop.time_ms - run_start.time_ms) / 1000.0
    return summary


def normalize_ruleset(text, benchmark):
    """'4.0', '4.0.0' and 'v4.0' name the same ruleset; returns its 'X.Y' when the benchmark is
    in it, or raises ValueError."""
    rules = BENCHMARK_RULES[benchmark]
    parts = text.lstrip("vV").split(".")
    if len(parts) == 3 and parts[2] == "0":
        parts = parts[:2]
    short = ".".join(parts)
    if short in rules["rulesets"]:
        return short
    retired = rules["retired_after"]
    try:
        newer = tuple(int(p) for p in parts) > tuple(int(p) for p in retired.split("."))
    except ValueError:
        newer = False
    if newer:
        raise ValueError("--ruleset {}: {} is not a benchmark of MLPerf training {} (it was "
                         "retired after {}); use {}{}".format(
                             text, benchmark, short, retired, retired,
                             " or older" if len(rules["rulesets"]) > 1 else ""))
    raise ValueError("--ruleset {}: not a supported training ruleset for {}; supported: {}"
                     .format(text, benchmark, ", ".join(rules["rulesets"])))


def choose_ruleset(parser, args, source):
    """Sets args.ruleset: the benchmark's default, or --ruleset when the benchmark is in it (a
    usage error otherwise). `source` says where the benchmark came from, for the message."""
    if args.ruleset is None:
        args.ruleset = BENCHMARK_RULES[args.benchmark]["default_ruleset"]
        return
    try:
        args.ruleset = normalize_ruleset(args.ruleset, args.benchmark)
    except ValueError as exc:
        parser.error(str(exc) + source)


def parse_args(argv):
    """Returns (parser, args). args.ruleset is settled here when --benchmark is given, else
    once the log has named its benchmark (main)."""
    parser = argparse.ArgumentParser(
        description="Check an MLPerf training log (:::MLLOG lines) against the MLPerf logging "
                    "rules for a benchmark. Exit 0: follows the rules; 1: violations (listed); "
                    "2: bad command line, unreadable file, or a benchmark this checker does "
                    "not know.")
    parser.add_argument("--benchmark", default=None,
                        help="resnet or transformer (default: the log's submission_benchmark; "
                             "resnet when the log has none)")
    parser.add_argument("--ruleset", default=None,
                        help="MLPerf training ruleset X.Y (default: the last with the "
                             "benchmark; supported: {})".format("; ".join(
                                 "{} {} (default {})".format(
                                     b, ", ".join(r["rulesets"]), r["default_ruleset"])
                                 for b, r in BENCHMARK_RULES.items())))
    parser.add_argument("--strict", action="store_true",
                        help="treat the rules that bind real submissions only (warnings) as "
                             "errors")
    parser.add_argument("mllog_file", help="the log, e.g. OUTPUT_DIR/mllog.txt")
    args = parser.parse_args(argv)
    if args.benchmark is not None:
        if args.benchmark not in BENCHMARKS:
            parser.error("--benchmark {}: not supported; supported: {}".format(
                args.benchmark, ", ".join(BENCHMARKS)))
        choose_ruleset(parser, args, "")
    return parser, args


def logged_benchmark(text):
    """The value and line of the log's first submission_benchmark, or (None, None). Lines that
    do not parse are skipped here; check_log reports them."""
    for line_no, raw in enumerate(text.splitlines(), start=1):
        pos = raw.find(TOKEN)
        if pos < 0:
            continue
        try:
            obj = json.loads(raw[pos + len(TOKEN):], parse_constant=reject_non_json_constant)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("key") == "submission_benchmark":
            return obj.get("value"), line_no
    return None, None


def benchmark_from_log(path, text):
    """The benchmark whose rules apply when --benchmark is not given: the log's
    submission_benchmark; resnet when the log has none (check_counts then reports it missing),
    as before the checker knew another benchmark. A benchmark it does not know ends the run
    with exit status 2: there are no rules here to check its log against."""
    value, line_no = logged_benchmark(text)
    if value is None and line_no is None:
        return "resnet"
    if value in BENCHMARKS:
        return value
    print("mllog: {}: line {}: submission_benchmark is {!r}, a benchmark this checker does not "
          "know; it checks {} (--benchmark checks a log against one of them anyway)".format(
              path, line_no, value, " and ".join(BENCHMARKS)), file=sys.stderr)
    sys.exit(2)


def read_log(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as exc:
        print("mllog: cannot read {}: {}".format(path, exc.strerror), file=sys.stderr)
        sys.exit(2)


def print_outcome(path, args, findings, summary):
    for n in findings.notes:
        print("mllog: note: " + n)
    for w in findings.warnings:
        print("mllog: warning: " + w)
    if findings.errors:
        print("mllog: FAILED: {} has {} violation(s) of the MLPerf training {} logging rules for "
              "{}:".format(path, len(findings.errors), args.ruleset, args.benchmark))
        for e in findings.errors:
            print("  " + e)
        return 1
    details = ", ".join("{} {}".format(k, "{:.4g}".format(v) if isinstance(v, float) else v)
                        for k, v in summary.items())
    print("mllog: OK ({}, ruleset {}{}, {}, {} warning(s), {} note(s))".format(
        args.benchmark, args.ruleset, ", strict" if args.strict else "", details,
        len(findings.warnings), len(findings.notes)))
    return 0


def main(argv=None):
    parser, args = parse_args(sys.argv[1:] if argv is None else argv)
    text = read_log(args.mllog_file)
    if args.benchmark is None:
        args.benchmark = benchmark_from_log(args.mllog_file, text)
        choose_ruleset(parser, args, "" if args.benchmark == "resnet" else
                       " ({} names it in submission_benchmark)".format(args.mllog_file))
    findings, summary = check_log(text, args.ruleset, args.strict, args.benchmark)
    return print_outcome(args.mllog_file, args, findings, summary)


if __name__ == "__main__":
    sys.exit(main())
