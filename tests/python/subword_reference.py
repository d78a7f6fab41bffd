"""A plain-Python statement of the MLPerf reference Transformer's subword tokenizer (issue 25), the
expectation the C++ tokenizer (scaletrain-data translation) is to be tested against. Written from a description of the
reference's behaviour (retired_benchmarks/transformer/tensorflow/transformer/utils/tokenizer.py
in mlcommons/training), not copied from it; it reproduces the examples of the reference's tests:

- text splits into maximal runs of "alphanumeric" characters (Unicode general category L* or N*)
  and of the others; a run that is exactly one space is dropped unless it is the first or the
  last run;
- each run is escaped (backslash to "\\\\", underscore to "\\u", characters outside the alphabet
  and the newline to "\\<decimal>;") and ends with "_";
- an escaped run is cut into subtokens by greedy longest match against the vocabulary;
- ids 0 and 1 are "<pad>" and "<EOS>";
- decoding joins the subtokens, splits at "_", unescapes, and puts one space between two
  consecutive runs that both start with an alphanumeric character;
- the vocabulary is built in 4 rounds from token counts with a minimum count (6 in the reference).

A module (SubwordTokenizer, build_vocabulary, search_min_count, count_runs, split_text, escape,
unescape); tests/python/check_translation_data.py compares scaletrain's output with it.
"""
import collections
import re
import unicodedata

PAD, EOS = "<pad>", "<EOS>"
RESERVED = [PAD, EOS]
ESCAPE_CHARS = set("\\_u;0123456789")
UNDEFINED = "\u3013"


def is_alnum(ch):
    return unicodedata.category(ch)[0] in ("L", "N")


def split_text(text):
    """Maximal runs of one class (alphanumeric or not); single-space runs dropped but at the ends."""
    if not text:
        return []
    runs, start = [], 0
    for i in range(1, len(text)):
        if is_alnum(text[i]) != is_alnum(text[i - 1]):
            runs.append((start, text[start:i]))
            start = i
    runs.append((start, text[start:]))
    last = len(runs) - 1
    return [run for k, (pos, run) in enumerate(runs) if run != " " or pos == 0 or k == last]


def join_runs(runs):
    out = []
    for k, run in enumerate(runs):
        if k > 0 and run and runs[k - 1] and is_alnum(runs[k - 1][0]) and is_alnum(run[0]):
            out.append(" ")
        out.append(run)
    return "".join(out)


def escape(run, alphabet):
    run = run.replace("\\", "\\\\").replace("_", "\\u")
    return "".join(c if c in alphabet and c != "\n" else f"\\{ord(c)};" for c in run) + "_"


_UNESCAPE = re.compile(r"\\u|\\\\|\\([0-9]+);")


def unescape(escaped):
    def one(m):
        if m.group(1) is None:
            return "_" if m.group(0) == "\\u" else "\\"
        try:
            return chr(int(m.group(1)))
        except (ValueError, OverflowError):
            return UNDEFINED
    return _UNESCAPE.sub(one, escaped)


def greedy_split(escaped, vocab, max_len):
    """Greedy longest match; raises where no subtoken fits (the alphabet should prevent that)."""
    pieces, start = [], 0
    while start < len(escaped):
        for end in range(min(len(escaped), start + max_len), start, -1):
            if escaped[start:end] in vocab:
                pieces.append(escaped[start:end])
                start = end
                break
        else:
            raise ValueError(f"no subtoken of the vocabulary matches {escaped[start:]!r}")
    return pieces


class SubwordTokenizer:
    def __init__(self, subtokens):
        if subtokens[:2] != RESERVED:
            subtokens = RESERVED + [s for s in subtokens if s not in RESERVED]
        self.subtokens = subtokens
        self.ids = {s: i for i, s in enumerate(subtokens)}
        self.max_len = max(len(s) for s in subtokens)
        self.alphabet = set("".join(subtokens)) | ESCAPE_CHARS

    @classmethod
    def from_file(cls, path):
        """One subtoken a line between single quotes (the reference's file)."""
        with open(path, encoding="utf-8") as f:
            entries = [line.strip()[1:-1] for line in f if line.strip()]
        return cls([e for e in entries if e not in RESERVED])

    def to_file(self, path):
        with open(path, "w", encoding="utf-8") as f:
            for s in self.subtokens:
                f.write(f"'{s}'\n")

    def encode(self, text, add_eos=False):
        ids = []
        for run in split_text(text):
            ids += [self.ids[p] for p in greedy_split(escape(run, self.alphabet), self.ids, self.max_len)]
        return ids + [1] if add_eos else ids

    def decode(self, ids):
        joined = "".join(self.subtokens[i] for i in ids if i < len(self.subtokens))
        return join_runs([unescape(piece) for piece in joined.split("_") if piece])


def count_runs(lines, file_bytes=0, sample_chars=0):
    """Run counts of the lines; with sample_chars > 0, the reference's sample of a file of
    file_bytes bytes: after every int(file_bytes / (2 * sample_chars)) skipped lines one is read,
    until about sample_chars characters are."""
    counts = collections.Counter()
    skip = int(file_bytes / (sample_chars * 2)) if sample_chars > 0 else 0
    budget, skipped = sample_chars, 0
    for line in lines:
        if skipped < skip:
            skipped += 1
            continue
        if sample_chars > 0 and budget < 0:
            break
        line = line.strip()
        budget -= len(line)
        skipped = 0
        counts.update(split_text(line))
    return counts


def _count_subtokens(run_counts, vocab, max_len, alphabet):
    """For each run's greedy segmentation, every substring from a segment start to the run's end."""
    counts = collections.Counter()
    for run, count in run_counts.items():
        escaped = escape(run, alphabet)
        start = 0
        for piece in greedy_split(escaped, vocab, max_len):
            for end in range(start + 1, len(escaped) + 1):
                counts[escaped[start:end]] += count
            start += len(piece)
    return counts


def _next_subtokens(counts, alphabet, min_count):
    by_length = collections.defaultdict(list)
    for s, c in counts.items():
        if c >= min_count:
            by_length[len(s)].append(s)
    longest = max(by_length) if by_length else 1
    counts = dict(counts)
    candidates = []
    for length in range(longest, 0, -1):
        for s in sorted(by_length[length]):
            c = counts.get(s, 0)
            if c < min_count:
                continue
            if s not in alphabet and s not in RESERVED:
                candidates.append((c, s))
            for k in range(1, length):
                counts[s[:k]] = counts.get(s[:k], 0) - c
    candidates += [(counts.get(a, 0), a) for a in alphabet]
    candidates.sort(reverse=True)
    return RESERVED + [s for _, s in candidates], longest


def build_vocabulary(lines, min_count=6, rounds=4, run_counts=None):
    """The reference's vocabulary from text lines (or from run counts): the alphabet of the runs,
    then `rounds` rounds."""
    run_counts = count_runs(lines) if run_counts is None else run_counts
    alphabet = set("".join(run_counts)) | set("".join(RESERVED)) | ESCAPE_CHARS
    subtokens, max_len = RESERVED + sorted(alphabet), 1
    for _ in range(rounds):
        vocab = {s: i for i, s in enumerate(subtokens)}
        counts = _count_subtokens(run_counts, vocab, max_len, alphabet)
        subtokens, max_len = _next_subtokens(counts, alphabet, min_count)
    return SubwordTokenizer(subtokens)


def search_min_count(run_counts, target_size, threshold, lo=1, hi=1000):
    """The reference's binary search of min_count for a vocabulary near target_size."""
    mid = (lo + hi) // 2
    here = build_vocabulary(None, mid, run_counts=run_counts)
    size = len(here.subtokens)
    if abs(size - target_size) < threshold or lo >= hi or mid < 2:
        return here, mid
    other, other_mid = (search_min_count(run_counts, target_size, threshold, mid + 1, hi) if size > target_size
                        else search_min_count(run_counts, target_size, threshold, lo, mid - 1))
    if abs(len(other.subtokens) - target_size) < abs(size - target_size):
        return other, other_mid
    return here, mid
