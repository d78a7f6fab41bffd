#!/usr/bin/python3
"""A plain-Python port of MLPerf's Transformer BLEU, for testing `scaletrain-data bleu`.

The reference: mlcommons/training, retired_benchmarks/transformer/tensorflow/transformer/
compute_bleu.py (bleu_tokenize, bleu_wrapper) and utils/metrics.py (compute_bleu,
_get_ngrams_with_counter), themselves from tensor2tensor's bleu_hook.py. This port keeps the
reference's code paths (the same regexes built the same way from unicodedata, the same Counter
arithmetic) but needs only the standard library: no TensorFlow (tf.gfile.Open(f).read() is a
UTF-8 read) and no NumPy (np.float32 is a struct round trip).

Two places differ from the reference, on purpose:
  * where the reference divides by zero (no token in the hypotheses or the references), the
    score is 0 and `note` says why; it prints the note on stderr;
  * the command's options are those of `scaletrain-data bleu` (--hypotheses, --references,
    --cased, --json), and it prints what that command prints: the reference's
    "Case-insensitive results: SCORE" (and "Case-sensitive results: SCORE" with --cased), or with
    --json one object in the layout of scaletrain's Json::dump(2) (numbers as "%.15g").

The score is what the reference computes under NumPy 1.x: compute_bleu returns
np.float32(geo_mean * bp); bleu_wrapper's "* 100" (a Python int) promotes it to float64, so the
score is 100 times the float32, printed with repr().

Usable as a module (bleu_tokenize, compute_bleu, bleu_wrapper, read_lines, score_json) and as a
command:
  /usr/bin/python3 tests/python/compute_bleu_port.py --hypotheses H --references R [--cased] [--json]
"""

import argparse
import collections
import math
import re
import struct
import sys
import unicodedata

MAX_ORDER = 4


class UnicodeRegex(object):
    """The reference's classes: every P (and S) character of unicodedata, in code point order,
    pasted unescaped between brackets. So the "\\" (U+005C, Po) escapes the "]" after it and is
    not in the punctuation class: the reference's quirk, kept."""

    def __init__(self):
        punctuation = self.property_chars("P")
        self.nondigit_punct_re = re.compile(r"([^\d])([" + punctuation + r"])")
        self.punct_nondigit_re = re.compile(r"([" + punctuation + r"])([^\d])")
        self.symbol_re = re.compile("([" + self.property_chars("S") + "])")

    @staticmethod
    def property_chars(prefix):
        # range(sys.maxunicode) as in the reference (U+10FFFF, unassigned, is left out).
        return "".join(chr(x) for x in range(sys.maxunicode) if unicodedata.category(chr(x)).startswith(prefix))


uregex = UnicodeRegex()


def bleu_tokenize(string):
    """The reference's bleu_tokenize: three re.sub passes, then str.split()."""
    string = uregex.nondigit_punct_re.sub(r"\1 \2 ", string)
    string = uregex.punct_nondigit_re.sub(r" \1 \2", string)
    string = uregex.symbol_re.sub(r" \1 ", string)
    return string.split()


def _get_ngrams_with_counter(segment, max_order):
    ngram_counts = collections.Counter()
    for order in range(1, max_order + 1):
        for i in range(0, len(segment) - order + 1):
            ngram = tuple(segment[i:i + order])
            ngram_counts[ngram] += 1
    return ngram_counts


def _float32(x):
    """np.float32(x) as a Python float: rounded to the nearest float32."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def compute_bleu(reference_corpus, translation_corpus, max_order=MAX_ORDER, use_bp=True):
    """metrics.compute_bleu, returning its parts: a dict with bleu (on 0..100, float32 * 100 as
    bleu_wrapper makes it), geo_mean, brevity_penalty, precisions, matches, possible, hyp_len,
    ref_len and note (None, or why the score is 0 where the reference divides by zero)."""
    reference_length = 0
    translation_length = 0
    bp = 1.0
    geo_mean = 0

    matches_by_order = [0] * max_order
    possible_matches_by_order = [0] * max_order
    precisions = []

    for (references, translations) in zip(reference_corpus, translation_corpus):
        reference_length += len(references)
        translation_length += len(translations)
        ref_ngram_counts = _get_ngrams_with_counter(references, max_order)
        translation_ngram_counts = _get_ngrams_with_counter(translations, max_order)

        overlap = dict((ngram, min(count, translation_ngram_counts[ngram]))
                       for ngram, count in ref_ngram_counts.items())

        for ngram in overlap:
            matches_by_order[len(ngram) - 1] += overlap[ngram]
        for ngram in translation_ngram_counts:
            possible_matches_by_order[len(ngram) - 1] += translation_ngram_counts[ngram]

    precisions = [0] * max_order
    smooth = 1.0

    for i in range(0, max_order):
        if possible_matches_by_order[i] > 0:
            precisions[i] = float(matches_by_order[i]) / possible_matches_by_order[i]
            if matches_by_order[i] > 0:
                precisions[i] = float(matches_by_order[i]) / possible_matches_by_order[i]
            else:
                smooth *= 2
                precisions[i] = 1.0 / (smooth * possible_matches_by_order[i])
        else:
            precisions[i] = 0.0

    if max(precisions) > 0:
        p_log_sum = sum(math.log(p) for p in precisions if p)
        geo_mean = math.exp(p_log_sum / max_order)

    parts = {
        "geo_mean": float(geo_mean),
        "hyp_len": translation_length,
        "ref_len": reference_length,
        "precisions": [float(p) for p in precisions],
        "matches": matches_by_order,
        "possible": possible_matches_by_order,
        "note": None,
    }
    if translation_length == 0 or reference_length == 0:
        # The reference raises ZeroDivisionError here.
        which = "hypotheses" if translation_length == 0 else "references"
        parts["brevity_penalty"] = 0.0 if translation_length == 0 else 1.0
        parts["note"] = "the %s hold no token: BLEU is 0 (the reference fails here, dividing by zero)" % which
        parts["bleu"] = 0.0
        return parts

    if use_bp:
        ratio = translation_length / reference_length
        bp = math.exp(1 - 1. / ratio) if ratio < 1.0 else 1.0
    bleu = geo_mean * bp
    parts["brevity_penalty"] = bp
    parts["bleu"] = _float32(bleu) * 100
    return parts


class BleuError(Exception):
    pass


def read_lines(filename):
    """tf.gfile.Open(filename).read().strip().splitlines(), with the UTF-8 error naming the line."""
    try:
        with open(filename, "rb") as f:
            data = f.read()
    except OSError as e:
        raise BleuError("%s: cannot open (%s)" % (filename, e.strerror))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise BleuError("%s line %d: not UTF-8 (%s)" % (filename, line, e.reason))
    return text.strip().splitlines()


def bleu_wrapper(ref_filename, hyp_filename, case_sensitive=False):
    """The reference's bleu_wrapper, returning compute_bleu's parts (score in parts["bleu"])."""
    ref_lines = read_lines(ref_filename)
    hyp_lines = read_lines(hyp_filename)
    if len(ref_lines) != len(hyp_lines):
        raise BleuError("%s has %d lines but %s has %d: the reference and translation files have a different "
                        "number of lines" % (hyp_filename, len(hyp_lines), ref_filename, len(ref_lines)))
    if not case_sensitive:
        ref_lines = [x.lower() for x in ref_lines]
        hyp_lines = [x.lower() for x in hyp_lines]
    ref_tokens = [bleu_tokenize(x) for x in ref_lines]
    hyp_tokens = [bleu_tokenize(x) for x in hyp_lines]
    parts = compute_bleu(ref_tokens, hyp_tokens)
    parts["lines"] = len(hyp_lines)
    return parts


# --- output in scaletrain's formats -----------------------------------------------------------

def _quote(s):
    out = ['"']
    for c in s:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif ord(c) < 0x20:
            out.append("\\u%04x" % ord(c))
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def dump_json(value, indent=2, depth=0):
    """scaletrain's Json::dump(indent): Python's json.dumps(indent=2) layout, floats as "%.15g"."""
    def newline(d):
        return "\n" + " " * (indent * d)

    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "%.15g" % value if math.isfinite(value) else "null"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, list):
        if not value:
            return "[]"
        items = [newline(depth + 1) + dump_json(v, indent, depth + 1) for v in value]
        return "[" + ",".join(items) + newline(depth) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [newline(depth + 1) + _quote(k) + ": " + dump_json(v, indent, depth + 1) for k, v in value.items()]
        return "{" + ",".join(items) + newline(depth) + "}"
    raise TypeError(type(value))


def score_json(parts):
    keys = ["bleu", "brevity_penalty", "geo_mean", "hyp_len", "ref_len", "precisions", "matches", "possible", "note"]
    return {k: parts[k] for k in keys}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="compute_bleu_port.py", description=__doc__.split("\n")[0])
    parser.add_argument("--hypotheses", required=True, help="the translations (the reference's --translation)")
    parser.add_argument("--references", required=True, help="the reference translations (its --reference)")
    parser.add_argument("--cased", action="store_true", help="also print case-sensitive BLEU")
    parser.add_argument("--json", action="store_true", help="print the parts as scaletrain-data bleu --json does")
    args = parser.parse_args(argv)
    try:
        uncased = bleu_wrapper(args.references, args.hypotheses, False)
        cased = bleu_wrapper(args.references, args.hypotheses, True) if args.cased else None
    except BleuError as e:
        print("compute_bleu_port.py: error: %s" % e, file=sys.stderr)
        return 1
    if args.json:
        out = {"hypotheses": args.hypotheses, "references": args.references, "lines": uncased["lines"],
               "uncased": score_json(uncased)}
        if cased is not None:
            out["cased"] = score_json(cased)
        print(dump_json(out))
    else:
        print("Case-insensitive results:", repr(uncased["bleu"]))
        if cased is not None:
            print("Case-sensitive results:", repr(cased["bleu"]))
    if uncased["note"]:
        print("compute_bleu_port.py: note: %s" % uncased["note"], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
