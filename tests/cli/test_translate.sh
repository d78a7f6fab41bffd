#!/usr/bin/env bash
# Translations as text (issue 25): a dataset converted from text files (scaletrain-data
# translation: a toy language whose target is the source's words reversed), transformer-tiny
# trained on it for 8 epochs on 2 ranks, then
#  - scaletrain eval --translations writes the evaluation split's translations, one a line, and
#    `scaletrain-data bleu` of that file against the val target text gives eval's BLEU;
#  - scaletrain translate of the val source text on 2 ranks writes the same lines (the same
#    sentences in the same batches on the same ranks: the same decoding), with the vocabulary from
#    --data or from a vocabulary file (the shard's, extracted with h5py); an empty input line stays
#    empty and the line count is kept; greedy decoding (--beam-size 1) too;
#  - errors, each naming what is wrong: a model that does not translate, --data and --vocabulary
#    together or neither, a vocabulary of another size than the checkpoint's embedding, an input
#    line that is not UTF-8 (its line number), a missing input, an output directory that does not
#    exist, --translations for an image model.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/translate
rm -rf "$T" && mkdir -p "$T"
MPI=(timeout 300 mpirun -np 2 --oversubscribe)

# The toy language: 1,200 training and 20 evaluation sentences of 3 to 8 words out of 30; each
# target is its source reversed, capitalised (other subtokens on the two sides).
"$PY" - "$T" <<'PY'
import random, sys
T = sys.argv[1]
rng = random.Random(7)
words = [w for w in "apple river stone cloud green little quick house tree light water bread music paper horse "
         "window garden summer winter yellow silver market letter forest bridge candle mirror rocket pencil sugar".split()]
def pairs(n):
    out = []
    for _ in range(n):
        s = [rng.choice(words) for _ in range(rng.randint(3, 8))]
        out.append((" ".join(s), " ".join(w.capitalize() for w in reversed(s))))
    return out
for name, n in (("train", 1200), ("val", 20)):
    p = pairs(n)
    open(f"{T}/{name}.en", "w").write("".join(a + "\n" for a, _ in p))
    open(f"{T}/{name}.de", "w").write("".join(b + "\n" for _, b in p))
PY
"$BIN/scaletrain-data" translation --train-source "$T/train.en" --train-target "$T/train.de" \
  --val-source "$T/val.en" --val-target "$T/val.de" --min-count 2 --output "$T/data" >"$T/convert.log" 2>&1 ||
  fail "conversion: $(tail -n 5 "$T/convert.log")"
# 8 epochs of 15 steps (about 15 s here; BLEU about 65 on the val sentences): every translation
# then has words, so the two BLEU counts see 20 lines.
"${MPI[@]}" "$BIN/scaletrain" train --model transformer-tiny --data "$T/data" --threads 1 --epochs 8 --eval-every 8 \
  --batch-tokens 256 --warmup-steps 50 --base-lr 0.003 --log-every 0 --output-dir "$T/run" >"$T/train.log" 2>&1 ||
  fail "training: $(tail -n 5 "$T/train.log")"

echo "== scaletrain eval --translations: one line a sentence; its BLEU is eval's"
"${MPI[@]}" "$BIN/scaletrain" eval --model transformer-tiny --checkpoint "$T/run" --data "$T/data" --threads 1 \
  --translations "$T/eval.de" >"$T/eval.log" 2>&1 || fail "eval: $(tail -n 5 "$T/eval.log")"
[ "$(wc -l <"$T/eval.de")" = 20 ] || fail "eval --translations wrote $(wc -l <"$T/eval.de") lines, not 20"
grep -q "wrote 20 translations to $T/eval.de" "$T/eval.log" || fail "eval did not say it wrote: $(tail -n 2 "$T/eval.log")"
eval_bleu=$(sed -n 's/.*BLEU \([0-9.]*\) .*/\1/p' "$T/eval.log")
file_bleu=$("$BIN/scaletrain-data" bleu --hypotheses "$T/eval.de" --references "$T/val.de" --json |
  "$PY" -c 'import json, sys; print("%.2f" % json.load(sys.stdin)["uncased"]["bleu"])')
[ -n "$eval_bleu" ] && [ "$eval_bleu" = "$file_bleu" ] ||
  fail "eval printed BLEU '$eval_bleu', its translations score $file_bleu against val.de"
echo "ok: BLEU $eval_bleu from eval and from its file; first line: $(head -n 1 "$T/eval.de")"

echo "== scaletrain translate: the same translations from the text, vocabulary from --data or a file"
"${MPI[@]}" "$BIN/scaletrain" translate --model transformer-tiny --checkpoint "$T/run" --data "$T/data" --threads 1 \
  --input "$T/val.en" --output "$T/translate.de" >"$T/translate.log" 2>&1 ||
  fail "translate: $(tail -n 5 "$T/translate.log")"
cmp -s "$T/eval.de" "$T/translate.de" || fail "translate and eval --translations differ: $(diff "$T/eval.de" "$T/translate.de" | head -5)"
grep -q "wrote 20 translations to $T/translate.de (.* sentences/s, beam search 4)" "$T/translate.log" ||
  fail "translate's last line: $(tail -n 1 "$T/translate.log")"
"$PY" - "$T" <<'PY'
import glob, h5py, sys
T = sys.argv[1]
with h5py.File(sorted(glob.glob(f"{T}/data/val/*.h5"))[0], "r") as f:
    open(f"{T}/vocab.subwords", "wb").write(f["vocabulary"][()].tobytes())
PY
"${MPI[@]}" "$BIN/scaletrain" translate --model transformer-tiny --checkpoint "$T/run" --vocabulary "$T/vocab.subwords" \
  --threads 1 --input "$T/val.en" --output "$T/vocab.de" >"$T/vocab.log" 2>&1 || fail "translate --vocabulary: $(tail -n 5 "$T/vocab.log")"
cmp -s "$T/eval.de" "$T/vocab.de" || fail "translate --vocabulary differs from eval's translations"
echo "ok: translate (--data, --vocabulary) writes eval's translations"

# One rank, an empty line in the middle and a last line without its newline; greedy decoding.
{ head -n 3 "$T/val.en"; echo; printf '%s' "$(sed -n 4p "$T/val.en")"; } >"$T/mixed.en"
timeout 300 "$BIN/scaletrain" translate --model transformer-tiny --checkpoint "$T/run" --data "$T/data" --threads 1 \
  --beam-size 1 --input "$T/mixed.en" --output "$T/mixed.de" >"$T/mixed.log" 2>&1 || fail "translate mixed: $(tail -n 5 "$T/mixed.log")"
[ "$(wc -l <"$T/mixed.de")" = 5 ] && [ -z "$(sed -n 4p "$T/mixed.de")" ] && [ -n "$(sed -n 5p "$T/mixed.de")" ] ||
  fail "translate of 5 lines (the 4th empty): $(cat -A "$T/mixed.de")"
grep -q "greedy decoding" "$T/mixed.log" || fail "--beam-size 1 is not greedy: $(tail -n 1 "$T/mixed.log")"
echo "ok: 5 lines in, 5 out, the empty one empty"

echo "== errors"
TR=("$BIN/scaletrain" translate --checkpoint "$T/run" --threads 1 --input "$T/val.en" --output "$T/x.de")
expect_failure "an image model" "--model resnet20 does not translate" "${TR[@]}" --model resnet20 --data "$T/data"
expect_failure "both vocabularies" "--data DATASET (the training data's) or --vocabulary FILE, one of them" \
  "${TR[@]}" --model transformer-tiny --data "$T/data" --vocabulary "$T/vocab.subwords"
expect_failure "no vocabulary" "or --vocabulary FILE, one of them" "${TR[@]}" --model transformer-tiny
head -n 30 "$T/vocab.subwords" >"$T/short.subwords"
expect_failure "another vocabulary" "has 30 subtokens, the embedding of" \
  "${TR[@]}" --model transformer-tiny --vocabulary "$T/short.subwords"
printf 'apple river\n\xff\xfe stone\n' >"$T/latin.en"
expect_failure "text that is not UTF-8" "$T/latin.en line 2" "$BIN/scaletrain" translate --model transformer-tiny \
  --checkpoint "$T/run" --data "$T/data" --threads 1 --input "$T/latin.en" --output "$T/x.de"
expect_failure "a missing input" "--input $T/nothing.en does not exist" "$BIN/scaletrain" translate \
  --model transformer-tiny --checkpoint "$T/run" --data "$T/data" --input "$T/nothing.en" --output "$T/x.de"
expect_failure "an output directory that does not exist" "the directory $T/no/such does not exist" \
  "${TR[@]:0:6}" --input "$T/val.en" --model transformer-tiny --data "$T/data" --output "$T/no/such/x.de"
expect_failure "--translations for an image model" "--translations is for translation models" \
  "$BIN/scaletrain" eval --model resnet20 --checkpoint "$T/run" --data "$T/data" --translations "$T/x.de"
[ ! -e "$T/x.de" ] || fail "a failed translate left $T/x.de"
echo "PASS"
