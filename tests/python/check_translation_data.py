"""Checks a translation dataset written by `scaletrain-data translation` against the plain-Python
statement of the reference's tokenizer (subword_reference.py), reading the shards with h5py:

  check_translation_data.py DATASET SOURCE TARGET --min-count N --sample-chars C --max-length L
                            [--target-size T --threshold H] [--vocabulary FILE] [--split train]

- the vocabulary stored in every shard equals the one subword_reference builds from the same
  text (both sides sampled as the reference samples a file), or the given file's;
- every pair kept is the encoding of its lines (end of sentence appended) in file order, the
  pairs dropped are exactly those with an empty side or a side longer than max_length;
- decoding the ids gives back each stripped line (the tokenizer is lossless).
Prints one line per check and exits non-zero at the first mismatch."""
import argparse
import glob
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import subword_reference as ref  # noqa: E402


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def read_split(dataset, split):
    shards = sorted(glob.glob(os.path.join(dataset, split, "*.h5")))
    if not shards:
        fail(f"no shards in {dataset}/{split}")
    vocab, pairs = None, []
    for path in shards:
        with h5py.File(path, "r") as f:
            text = bytes(f["vocabulary"][:]).decode("utf-8")
            if vocab is None:
                vocab = text
            elif text != vocab:
                fail(f"{path}: another vocabulary than the first shard's")
            if f.attrs["vocab_size"] != len([l for l in text.split("\n") if l.strip()]):
                fail(f"{path}: vocab_size {f.attrs['vocab_size']} is not the vocabulary's line count")
            s_tok, s_off = f["source_tokens"][:], f["source_offsets"][:]
            t_tok, t_off = f["target_tokens"][:], f["target_offsets"][:]
            for i in range(len(s_off) - 1):
                pairs.append((s_tok[s_off[i]:s_off[i + 1]].tolist(), t_tok[t_off[i]:t_off[i + 1]].tolist()))
    return vocab, pairs



def main():
    p = argparse.ArgumentParser()
    p.add_argument("dataset")
    p.add_argument("source")
    p.add_argument("target")
    p.add_argument("--min-count", type=int, default=6)
    p.add_argument("--sample-chars", type=float, default=1e6)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--target-size", type=int, default=0)
    p.add_argument("--threshold", type=int, default=327)
    p.add_argument("--vocabulary")
    p.add_argument("--split", default="train")
    a = p.parse_args()

    src = open(a.source, encoding="utf-8").read().split("\n")
    tgt = open(a.target, encoding="utf-8").read().split("\n")
    # A final newline ends the last line; it does not start another.
    for lines, path in ((src, a.source), (tgt, a.target)):
        if open(path, "rb").read().endswith(b"\n"):
            lines.pop()
    vocab_text, pairs = read_split(a.dataset, a.split)
    ours = [l.strip()[1:-1] for l in vocab_text.split("\n") if l.strip()]

    if a.vocabulary:
        expected = ref.SubwordTokenizer.from_file(a.vocabulary)
        # A Tensor2Tensor file's '<pad>_' and '<EOS>_' are its ids 0 and 1.
        with open(a.vocabulary, encoding="utf-8") as f:
            entries = [l.strip()[1:-1] for l in f if l.strip()]
        if entries[:2] == ["<pad>_", "<EOS>_"]:
            expected = ref.SubwordTokenizer(ref.RESERVED + entries[2:])
        how = f"read from {a.vocabulary}"
    else:
        counts = ref.count_runs(src, os.path.getsize(a.source), a.sample_chars)
        counts.update(ref.count_runs(tgt, os.path.getsize(a.target), a.sample_chars))
        if a.target_size:
            expected, min_count = ref.search_min_count(counts, a.target_size, a.threshold)
            how = f"searched: min count {min_count} for about {a.target_size}"
        else:
            expected = ref.build_vocabulary(None, a.min_count, run_counts=counts)
            how = f"min count {a.min_count}"
    if ours != expected.subtokens:
        diff = next(i for i in range(min(len(ours), len(expected.subtokens)) + 1)
                    if i >= len(ours) or i >= len(expected.subtokens) or ours[i] != expected.subtokens[i])
        fail(f"vocabulary differs from subword_reference's ({how}): {len(ours)} vs {len(expected.subtokens)} "
             f"subtokens, first difference at id {diff}: "
             f"{ours[diff:diff + 3]!r} vs {expected.subtokens[diff:diff + 3]!r}")
    print(f"ok: vocabulary of {len(ours)} subtokens equals subword_reference's ({how})")

    expected_pairs = []
    for s_line, t_line in zip(src, tgt):
        s_ids, t_ids = expected.encode(s_line.strip(), True), expected.encode(t_line.strip(), True)
        if len(s_ids) < 2 or len(t_ids) < 2:
            continue
        if a.split == "train" and (len(s_ids) > a.max_length or len(t_ids) > a.max_length):
            continue
        expected_pairs.append((s_ids, t_ids, s_line.strip(), t_line.strip()))
    if len(pairs) != len(expected_pairs):
        fail(f"{len(pairs)} pairs in the shards, subword_reference keeps {len(expected_pairs)}")
    for i, ((s, t), (es, et, sl, tl)) in enumerate(zip(pairs, expected_pairs)):
        if s != es or t != et:
            fail(f"pair {i} ({sl!r}): ids {s} / {t}, subword_reference {es} / {et}")
        if expected.decode(s[:-1]) != sl or expected.decode(t[:-1]) != tl:
            fail(f"pair {i}: decoding does not give back {sl!r} / {tl!r}")
    tokens = sum(len(s) + len(t) for s, t in pairs)
    print(f"ok: {len(pairs)} pairs ({tokens} ids) equal subword_reference's encoding and decode to their lines")


if __name__ == "__main__":
    main()
