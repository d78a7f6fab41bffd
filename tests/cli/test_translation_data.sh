#!/usr/bin/env bash
# scaletrain-data for the translation task, end to end, against the plain-Python statement of the
# reference's tokenizer (tests/python/subword_reference.py) read through h5py:
# - `translation` on real text (the licence texts every Debian machine has, with lines added that
#   exercise escaping: umlauts, underscores, backslashes, "\52;"-like text, CJK, emoji, combining
#   marks, runs of spaces): the vocabulary it builds equals subword_reference's, with the
#   reference's sampling of each side and with the min-count search for a target size; every
#   pair kept is the reference's encoding, dropped pairs are exactly the empty and too long ones,
#   and the ids decode to the lines; 2 ranks write the same shards as 1; --length-method truncate;
#   a TSV gives what two files give; a vocabulary file in Tensor2Tensor's format ('<pad>_') is read
#   with ids equal to its line numbers;
# - a dataset written with h5py as docs/dataset-format.md shows is inspected, and each kind of bad
#   data (an id outside the vocabulary, the padding id inside a sentence, an empty sentence, a
#   missing end of sentence, offsets that do not add up, shards with different vocabularies, an
#   unknown tokenizer) is
#   an error naming the file and the sentence;
# - the converter's usage errors; `synthetic --task translation` (copy and reverse).
# Env (set by ctest): ST_BIN (build/bin), ST_SOURCE (repository), ST_TMP (scratch).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

DATA=$BIN/scaletrain-data
SRC=$(cd "$(dirname "$0")/../.." && pwd)
CHECK=("$PY" "$SRC/tests/python/check_translation_data.py")
W=$TMP_ROOT/translation_data
rm -rf "$W"
mkdir -p "$W"

expect_in() {
  local text=$1
  shift
  for needle in "$@"; do grep -qF -- "$needle" <<<"$text" || fail "expected '$needle' in: $text"; done
}

echo "== help"
expect_in "$("$DATA" translation --help)" "--train-source" "--train-tsv" "--vocabulary" "--min-count" \
  "--target-vocab-size" "--max-length" "--length-method"
expect_in "$("$DATA" synthetic --task translation --help)" "--kind" "--sentences" "--words"
expect_in "$("$DATA" --help)" "translation"

echo "== text"
# Source: the GPL-3's lines; target: as many lines of the GPL-2 and LGPL-2.1 (real English prose;
# which language is which does not matter to the tokenizer), plus lines made to test escaping.
L=/usr/share/common-licenses
cat "$L/GPL-3" >"$W/src.txt"
cat "$L/GPL-2" "$L/LGPL-2.1" | head -n "$(wc -l <"$W/src.txt")" >"$W/tgt.txt"
"$PY" - "$W" <<'PY'
import sys
w = sys.argv[1]
extra = [
    ("Größere Übungen für Ärzte: 3½ Äpfel", "snake_case and back\\slash and \\52; literal"),
    ("東京は日本の首都です。", "Emoji 🙂 and café (e + U+0301: cafe\u0301)"),
    ("   leading and   inner   spaces   ", "tab\tinside a line"),
    ("_", "\\"),
    ("   ", "only spaces on the source side: dropped"),
]
with open(f"{w}/src.txt", "a", encoding="utf-8") as s, open(f"{w}/tgt.txt", "a", encoding="utf-8") as t:
    for a, b in extra:
        s.write(a + "\n")
        t.write(b + "\n")
PY
paste "$W/src.txt" "$W/tgt.txt" | grep -v $'\t.*\t' >"$W/pairs.tsv" || true

echo "== translation: the vocabulary built with sampling, 2 ranks, 3 shards"
out=$(mpirun --oversubscribe -np 2 "$DATA" translation --train-source "$W/src.txt" --train-target "$W/tgt.txt" \
  --val-source "$W/src.txt" --val-target "$W/tgt.txt" --output "$W/ds" --min-count 3 --vocab-sample-chars 8000 \
  --max-length 30 --shards 3)
echo "$out"
expect_in "$out" "discarded as too long" "dropped with an empty side" "split train: task translation en -> de"
"${CHECK[@]}" "$W/ds" "$W/src.txt" "$W/tgt.txt" --min-count 3 --sample-chars 8000 --max-length 30
"${CHECK[@]}" "$W/ds" "$W/src.txt" "$W/tgt.txt" --min-count 3 --sample-chars 8000 --split val
"$DATA" verify "$W/ds" >/dev/null
"$DATA" inspect "$W/ds" --json >"$W/inspect.json"
"$PY" - "$W/inspect.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
t, v = j["splits"]["train"], j["splits"]["val"]
assert t["task"] == "translation" and len(t["shards"]) == 3 and t["length_method"] == "discard", t
assert t["max_length"] == 30 and v["length_method"] == "none" and v["max_length"] > 30, v
print("ok: inspect --json describes both splits")
PY

echo "== one rank writes the same shards"
"$DATA" translation --train-source "$W/src.txt" --train-target "$W/tgt.txt" --output "$W/ds1" --min-count 3 \
  --vocab-sample-chars 8000 --max-length 30 --shards 3 >/dev/null
"$PY" - "$W/ds/train" "$W/ds1/train" <<'PY'
import glob, sys, h5py, numpy as np
a, b = (sorted(glob.glob(d + "/*.h5")) for d in sys.argv[1:])
assert len(a) == len(b) == 3
for x, y in zip(a, b):
    with h5py.File(x, "r") as f, h5py.File(y, "r") as g:
        for k in f:
            assert np.array_equal(f[k][:], g[k][:]), (x, k)
print("ok: 1 and 2 ranks wrote the same shards")
PY

echo "== the min-count search for a target size"
"$DATA" translation --train-source "$W/src.txt" --train-target "$W/tgt.txt" --output "$W/search" \
  --target-vocab-size 700 --vocab-sample-chars 0 >"$W/search.log"
grep -q "built with min count" "$W/search.log" || fail "no min count reported: $(cat "$W/search.log")"
"${CHECK[@]}" "$W/search" "$W/src.txt" "$W/tgt.txt" --target-size 700 --threshold 327 --sample-chars 0

echo "== truncate, and a TSV"
"$DATA" translation --train-tsv "$W/pairs.tsv" --output "$W/tsv" --min-count 3 --vocab-sample-chars 0 \
  --max-length 12 --length-method truncate >"$W/tsv.log"
grep -q "truncated" "$W/tsv.log" || fail "no truncation reported: $(cat "$W/tsv.log")"
"$PY" - "$W/tsv" "$W/pairs.tsv" "$SRC/tests/python" <<'PY'
import glob, sys, h5py
sys.path.insert(0, sys.argv[3])
import subword_reference as ref
ds, tsv = sys.argv[1], sys.argv[2]
f = h5py.File(sorted(glob.glob(ds + "/train/*.h5"))[0], "r")
tok = ref.SubwordTokenizer([l.strip()[1:-1] for l in bytes(f["vocabulary"][:]).decode().split("\n") if l.strip()])
so, to, st, tt = f["source_offsets"][:], f["target_offsets"][:], f["source_tokens"][:], f["target_tokens"][:]
rows = [l.split("\t") for l in open(tsv, encoding="utf-8").read().split("\n")[:-1]]
k = 0
for s_line, t_line in rows:
    s, t = tok.encode(s_line.strip(), True), tok.encode(t_line.strip(), True)
    if len(s) < 2 or len(t) < 2:
        continue
    s, t = [x[:11] + [1] if len(x) > 12 else x for x in (s, t)]
    assert st[so[k]:so[k + 1]].tolist() == s and tt[to[k]:to[k + 1]].tolist() == t, (k, s_line)
    k += 1
assert k == len(so) - 1 and f.attrs["length_method"] == "truncate"
print(f"ok: the TSV's {k} pairs, truncated to 12 tokens with the end of sentence kept")
PY

echo "== a Tensor2Tensor vocabulary file"
"$PY" - "$W/ds" "$W/t2t.subwords" <<'PY'
import glob, sys, h5py
f = h5py.File(sorted(glob.glob(sys.argv[1] + "/train/*.h5"))[0], "r")
entries = [l for l in bytes(f["vocabulary"][:]).decode().split("\n") if l.strip()]
assert entries[:2] == ["'<pad>'", "'<EOS>'"]
# Reversed order (other ids), in T2T's spelling of the reserved ids.
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(["'<pad>_'", "'<EOS>_'"] + entries[:1:-1]) + "\n")
PY
"$DATA" translation --train-source "$W/src.txt" --train-target "$W/tgt.txt" --output "$W/t2t" \
  --vocabulary "$W/t2t.subwords" >/dev/null
"${CHECK[@]}" "$W/t2t" "$W/src.txt" "$W/tgt.txt" --vocabulary "$W/t2t.subwords"

echo "== a dataset written with h5py, and bad data"
"$PY" - "$W/h5" "$W/ds" <<'PY'
import glob, os, sys, h5py, numpy as np
out, ds = sys.argv[1:]
vocab = bytes(h5py.File(sorted(glob.glob(ds + "/train/*.h5"))[0], "r")["vocabulary"][:])
size = len([l for l in vocab.decode().split("\n") if l.strip()])

def shard(path, src, tgt, vocabulary=vocab, size=size):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # As docs/dataset-format.md writes it (fixed-length strings, checksummed metadata).
    with h5py.File(path, "w", libver=("v110", "latest")) as f:
        f.attrs.update(scaletrain_format=2, task=np.bytes_("translation"), tokenizer=np.bytes_("mlperf-subword"),
                       vocab_size=size, source_language=np.bytes_("en"), target_language=np.bytes_("de"),
                       max_length=256, length_method=np.bytes_("discard"))
        f["vocabulary"] = np.frombuffer(vocabulary, dtype=np.uint8)
        for side, sents in (("source", src), ("target", tgt)):
            f[side + "_tokens"] = np.array([t for s in sents for t in s], dtype=np.int32)
            f[side + "_offsets"] = np.cumsum([0] + [len(s) for s in sents]).astype(np.int64)

good = [[5, 6, 1], [7, 1]], [[8, 1], [9, 10, 11, 1]]
shard(f"{out}/good/train/a.h5", *good)
shard(f"{out}/outside/train/a.h5", [[5, size + 7, 1], [7, 1]], good[1])
shard(f"{out}/padding/train/a.h5", good[0], [[8, 1], [9, 0, 11, 1]])
shard(f"{out}/empty/train/a.h5", [[5, 6, 1], [1]], good[1])
shard(f"{out}/no_eos/train/a.h5", [[5, 6, 7], [7, 1]], good[1])
shard(f"{out}/offsets/train/a.h5", *good)
with h5py.File(f"{out}/offsets/train/a.h5", "a") as f:
    f["source_offsets"][2] = 9
shard(f"{out}/tokenizer/train/a.h5", *good)
with h5py.File(f"{out}/tokenizer/train/a.h5", "a") as f:
    f.attrs["tokenizer"] = np.bytes_("sentencepiece")
shard(f"{out}/vocab/train/a.h5", *good)
other = vocab.replace(b"'the_'", b"'teh_'")
assert other != vocab
shard(f"{out}/vocab/train/b.h5", *good, vocabulary=other)
print("ok: wrote the h5py datasets")
PY
expect_in "$("$DATA" inspect "$W/h5/good")" "2 sentence pairs, 5 source and 6 target tokens"
expect_failure "id outside the vocabulary" "a.h5: source sentence 0 holds id" "$DATA" inspect "$W/h5/outside"
expect_failure "padding inside a sentence" "target sentence 1 holds the padding id 0 at position 1" \
  "$DATA" inspect "$W/h5/padding"
expect_failure "empty sentence" "source sentence 1 is empty" "$DATA" inspect "$W/h5/empty"
expect_failure "no end of sentence" "source sentence 0 ends in id 7" "$DATA" inspect "$W/h5/no_eos"
expect_failure "offsets" "source_offsets ends at 9 but the tokens dataset holds 5 ids" "$DATA" inspect "$W/h5/offsets"
expect_failure "another vocabulary" "b.h5: its vocabulary" "$DATA" inspect "$W/h5/vocab"
expect_failure "unknown tokenizer" "tokenizer 'sentencepiece' is unknown" "$DATA" inspect "$W/h5/tokenizer"

echo "== usage errors"
T=(--train-source "$W/src.txt" --train-target "$W/tgt.txt")
expect_failure "no training text" "give the training text" "$DATA" translation --output "$W/x"
expect_failure "source without target" "go together" "$DATA" translation --train-source "$W/src.txt" --output "$W/x"
expect_failure "lines differ" "has $(wc -l <"$W/src.txt") lines but" "$DATA" translation \
  --train-source "$W/src.txt" --train-target "$L/GPL-2" --output "$W/x"
printf 'one\ttwo\nno tab here\n' >"$W/bad.tsv"
expect_failure "TSV without a tab" "bad.tsv line 2: expected one tab" "$DATA" translation --train-tsv "$W/bad.tsv" \
  --output "$W/x"
printf 'good line\nbad \xff byte\n' >"$W/bad.txt"
expect_failure "not UTF-8" "bad.txt line 2: invalid UTF-8" "$DATA" translation --train-source "$W/bad.txt" \
  --train-target "$W/bad.txt" --output "$W/x" --min-count 1
expect_failure "method" "--length-method 'cut'" "$DATA" translation "${T[@]}" --output "$W/x" --length-method cut
expect_failure "max length" "--max-length 1 is out of range" "$DATA" translation "${T[@]}" --output "$W/x" \
  --max-length 1
expect_failure "missing vocabulary" "nope.subwords: cannot open" "$DATA" translation "${T[@]}" --output "$W/x" \
  --vocabulary "$W/nope.subwords"
expect_failure "existing output" "already" "$DATA" translation "${T[@]}" --output "$W/ds"

echo "== synthetic --task translation"
"$DATA" synthetic --task translation --kind reverse --sentences 50 --words 20 --output "$W/syn" >/dev/null
"$PY" - "$W/syn" <<'PY'
import glob, sys, h5py
f = h5py.File(sorted(glob.glob(sys.argv[1] + "/train/*.h5"))[0], "r")
so, to, st, tt = f["source_offsets"][:], f["target_offsets"][:], f["source_tokens"][:], f["target_tokens"][:]
assert len(so) == 51
for i in range(50):
    s, t = st[so[i]:so[i + 1]].tolist(), tt[to[i]:to[i + 1]].tolist()
    assert s[-1] == t[-1] == 1 and t[:-1] == s[-2::-1] and 2 <= len(s) - 1 <= 12 and all(2 <= x < 22 for x in s[:-1])
print("ok: synthetic reverse pairs")
PY
expect_failure "synthetic kind" "--kind 'sort'" "$DATA" synthetic --task translation --kind sort --sentences 5 \
  --output "$W/x"
echo "PASS"
