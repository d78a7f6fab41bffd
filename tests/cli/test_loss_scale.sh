#!/usr/bin/env bash
# Loss scaling (--loss-scale, train/loss_scaler.hpp) with real ranks and files:
#  - fp32 with a dynamic scale gives the bits of fp32 without one (scaling by a power of two and
#    back is exact), for each task's loss: resnet20 (softmax cross-entropy), transformer-tiny
#    (token cross-entropy), ncf (sigmoid BCE);
#  - a forced overflow (SCALETRAIN_INJECT_OVERFLOW=STEP:RANK: the loss's gradient made infinite on
#    one rank at one step) skips exactly that step and halves the scale: injected on rank 1 or on
#    rank 0, rank 0's final weights are the same, and they differ from the run without the
#    overflow; an inf that only rank 1 finds after the all-reduce (STEP:1:after) makes rank 0 skip
#    too, which it does only through the ranks' agreement; a loss that itself overflowed on one
#    rank (STEP:1:loss, a forward in 16 bits that overflowed) is skipped the same way, with a
#    warning from that rank, where without loss scaling it would stop the run as diverged;
#  - 5 overflowing steps in a row (STEP-LAST) are each skipped and warned about at the fifth;
#  - mllog.txt's run_stop gives the skipped steps and the final scale;
#  - with 2 micro-batches a step, dynamic = none bitwise;
#  - a run stopped after the overflow and resumed keeps the halved scale and the skip count and
#    ends bitwise equal to the uninterrupted one;
#  - bad values are refused with the option named.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/loss_scale
rm -rf "$T" && mkdir -p "$T"
CK=("$PY" "$(dirname "$0")/checkpoints.py")

report_check() {
  $PY - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
assert eval(sys.argv[2]), (sys.argv[2], r.get("loss_scale"), r.get("steps"))
PY
}

# 640 samples, global batch 32: 20 steps an epoch; 12 steps.
"$BIN/scaletrain-data" synthetic --samples 640 --val-samples 32 --image-size 16,16,3 --classes 5 --shards 2 \
  --output "$T/images" >/dev/null
IMG=(timeout 300 mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/images"
  --batch-size 16 --threads 1 --epochs 1 --log-every 0 --eval-every 0)

echo "== resnet20: fp32 with a dynamic loss scale is fp32 bit for bit"
"${IMG[@]}" --max-steps 12 --output-dir "$T/none" >"$T/none.log"
"${IMG[@]}" --max-steps 12 --output-dir "$T/dynamic" --loss-scale dynamic >"$T/dynamic.log"
grep -q "^loss scale: dynamic (PyTorch GradScaler's rules: from 65536" "$T/dynamic.log" ||
  fail "no loss-scale start-up line: $(head -n 12 "$T/dynamic.log")"
! grep -q "^loss scale" "$T/none.log" || fail "a loss-scale line without --loss-scale: $(grep "^loss scale" "$T/none.log")"
report_check "$T/dynamic" 'r["loss_scale"] == dict(r["loss_scale"], mode="dynamic", scale=65536, skipped_steps=0)'
report_check "$T/none" 'r["loss_scale"]["mode"] == "none"'
"${CK[@]}" same "$T/none" "$T/dynamic"
echo "ok: resnet20, dynamic scale = no scale, bitwise"

echo "== an overflow on one rank at step 5 is skipped by every rank"
SCALETRAIN_INJECT_OVERFLOW=5:1 "${IMG[@]}" --max-steps 12 --output-dir "$T/skip1" --loss-scale dynamic >"$T/skip1.log"
grep -q "^step 5: inf or NaN in the gradients after the all-reduce; skipped on every rank, loss scale 65536 -> 32768 (1 skipped in the run)" \
  "$T/skip1.log" || fail "no skip line for step 5: $(grep -n "step\|skip" "$T/skip1.log" | head)"
[ "$(grep -c "inf or NaN in the gradients" "$T/skip1.log")" -eq 1 ] || fail "more than one skip: $(grep "inf or NaN" "$T/skip1.log")"
report_check "$T/skip1" 'r["loss_scale"]["scale"] == 32768 and r["loss_scale"]["skipped_steps"] == 1 and r["steps"] == 12'
SCALETRAIN_INJECT_OVERFLOW=5:0 "${IMG[@]}" --max-steps 12 --output-dir "$T/skip0" --loss-scale dynamic >"$T/skip0.log"
"${CK[@]}" same "$T/skip1" "$T/skip0"
if "${CK[@]}" same "$T/skip1" "$T/dynamic" >/dev/null 2>&1; then fail "the skipped step changed nothing"; fi
echo "ok: the overflow skipped step 5 on both ranks and halved the scale"

echo "== an inf only one rank finds after the all-reduce: the ranks agree and all skip"
SCALETRAIN_INJECT_OVERFLOW=7:1:after "${IMG[@]}" --max-steps 12 --output-dir "$T/agree" --loss-scale dynamic >"$T/agree.log"
# Rank 0 found nothing itself: it logs the skip only because the ranks agreed on it.
grep -q "^step 7: inf or NaN in the gradients after the all-reduce; skipped on every rank, loss scale 65536 -> 32768" \
  "$T/agree.log" || fail "rank 0 did not skip step 7 with rank 1: $(grep -n "inf or NaN" "$T/agree.log")"
report_check "$T/agree" 'r["loss_scale"]["skipped_steps"] == 1'
echo "ok: rank 1's overflow after the all-reduce skipped step 7 on rank 0 too"

echo "== a loss that overflowed on one rank: that step is skipped and the run goes on"
SCALETRAIN_INJECT_OVERFLOW=5:1:loss "${IMG[@]}" --max-steps 12 --output-dir "$T/loss-inf" --loss-scale dynamic \
  >"$T/loss-inf.log" 2>"$T/loss-inf.err"
grep -qF "warning [rank 1]: step 5: the loss is inf (the forward overflowed); the step is skipped" "$T/loss-inf.err" ||
  fail "no warning from rank 1: $(cat "$T/loss-inf.err")"
grep -q "^step 5: inf or NaN in the gradients after the all-reduce; skipped on every rank, loss scale 65536 -> 32768" \
  "$T/loss-inf.log" || fail "no skip line for step 5: $(grep -n "inf\|skip" "$T/loss-inf.log" | head)"
report_check "$T/loss-inf" 'r["loss_scale"]["skipped_steps"] == 1 and r["steps"] == 12'
"${CK[@]}" same "$T/skip1" "$T/loss-inf"  # the weights of a skip for the gradient alone
echo "ok: the overflowed loss skipped step 5 and the run trained its 12 steps"

echo "== 5 overflowing steps in a row (3 to 7, on rank 1): each skipped, and a warning at the fifth"
SCALETRAIN_INJECT_OVERFLOW=3-7:1 "${IMG[@]}" --max-steps 12 --output-dir "$T/in-a-row" --loss-scale dynamic \
  >"$T/in-a-row.log" 2>"$T/in-a-row.err"
[ "$(grep -c "inf or NaN in the gradients after the all-reduce; skipped on every rank" "$T/in-a-row.log")" -eq 5 ] ||
  fail "not 5 skipped steps: $(grep -n "skipped" "$T/in-a-row.log")"
grep -qF "warning [rank 0]: 5 steps in a row skipped for inf or NaN gradients (loss scale now 2048)" "$T/in-a-row.err" ||
  fail "no warning after 5 skipped steps in a row: $(cat "$T/in-a-row.err")"
report_check "$T/in-a-row" 'r["loss_scale"]["scale"] == 2048 and r["loss_scale"]["skipped_steps"] == 5'
echo "ok: steps 3-7 skipped, the scale halved 5 times to 2048, warned at the fifth"

echo "== mllog.txt: the precision, and at run_stop the skipped steps and the final scale"
$PY - "$T/skip1/mllog.txt" "$T/none/mllog.txt" <<'PY'
import json, sys
def events(path):
    return {e["key"]: e for e in (json.loads(l.split(":::MLLOG ", 1)[1]) for l in open(path) if ":::MLLOG " in l)}
skip, none = events(sys.argv[1]), events(sys.argv[2])
assert skip["precision"]["value"] == "fp32" and skip["precision"]["metadata"]["loss_scale"] == "dynamic", skip["precision"]
m = skip["run_stop"]["metadata"]
assert m["skipped_steps"] == 1 and m["loss_scale"] == 32768 and m["status"] == "success", m
assert none["precision"]["metadata"]["loss_scale"] == "none", none["precision"]
assert "skipped_steps" not in none["run_stop"]["metadata"], none["run_stop"]
PY
echo "ok: mllog.txt"

echo "== 2 micro-batches a step (--accumulate-steps 2): dynamic = none, bitwise"
"${IMG[@]}" --max-steps 6 --accumulate-steps 2 --output-dir "$T/acc-none" >"$T/acc-none.log"
"${IMG[@]}" --max-steps 6 --accumulate-steps 2 --output-dir "$T/acc-dynamic" --loss-scale dynamic >"$T/acc-dynamic.log"
"${CK[@]}" same "$T/acc-none" "$T/acc-dynamic"

echo "== stopped after the overflow and resumed: the scale and its counters come back"
SCALETRAIN_INJECT_OVERFLOW=5:1 "${IMG[@]}" --output-dir "$T/cut" --loss-scale dynamic --max-steps 8 >"$T/cut1.log"
"${IMG[@]}" --max-steps 12 --output-dir "$T/cut" --loss-scale dynamic --resume auto >"$T/cut2.log"
grep -q "^loss scale: resumed at 32768, 3 finite steps since it last changed" "$T/cut2.log" ||
  fail "no resumed-scale line: $(grep -n "loss scale\|resumed" "$T/cut2.log")"
report_check "$T/cut" 'r["loss_scale"]["scale"] == 32768 and r["loss_scale"]["skipped_steps"] == 1 and r["steps"] == 12'
"${CK[@]}" same "$T/skip1" "$T/cut"
echo "ok: resumed bitwise, scale 32768 and 1 skipped step kept"

echo "== transformer-tiny and ncf: dynamic = none bitwise, and a skipped step"
"$BIN/scaletrain-data" synthetic --task translation --kind reverse --sentences 400 --val-sentences 8 --words 20 \
  --max-length 10 --seed 3 --output "$T/text" >/dev/null
TXT=(timeout 300 mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model transformer-tiny --data "$T/text"
  --batch-tokens 256 --threads 1 --epochs 1 --max-steps 6 --log-every 0 --eval-every 0)
"${TXT[@]}" --output-dir "$T/text-none" >"$T/text-none.log"
"${TXT[@]}" --output-dir "$T/text-dynamic" --loss-scale dynamic >"$T/text-dynamic.log"
"${CK[@]}" same "$T/text-none" "$T/text-dynamic"
SCALETRAIN_INJECT_OVERFLOW=3:1 "${TXT[@]}" --output-dir "$T/text-skip" --loss-scale dynamic >"$T/text-skip.log"
grep -q "^step 3: inf or NaN" "$T/text-skip.log" || fail "transformer: no skip at step 3: $(tail -n 5 "$T/text-skip.log")"
report_check "$T/text-skip" 'r["loss_scale"]["skipped_steps"] == 1 and r["loss_scale"]["scale"] == 32768'

"$BIN/scaletrain-data" synthetic --task recommendation --users 300 --items 400 --groups 10 --positives-per-user 8 \
  --eval-negatives 20 --output "$T/ratings" >/dev/null
NCF=(timeout 300 mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model ncf --data "$T/ratings"
  --batch-size 128 --threads 1 --epochs 1 --max-steps 6 --log-every 0 --eval-every 0)
"${NCF[@]}" --output-dir "$T/ncf-none" >"$T/ncf-none.log"
"${NCF[@]}" --output-dir "$T/ncf-dynamic" --loss-scale dynamic >"$T/ncf-dynamic.log"
"${CK[@]}" same "$T/ncf-none" "$T/ncf-dynamic"
SCALETRAIN_INJECT_OVERFLOW=2:0 "${NCF[@]}" --output-dir "$T/ncf-skip" --loss-scale 1024 >"$T/ncf-skip.log"
grep -q "^step 2: inf or NaN.*loss scale 1024 -> 1024" "$T/ncf-skip.log" || fail "ncf: no skip at step 2: $(tail -n 5 "$T/ncf-skip.log")"
report_check "$T/ncf-skip" 'r["loss_scale"]["mode"] == "fixed" and r["loss_scale"]["skipped_steps"] == 1'
echo "ok: transformer-tiny and ncf"

echo "== errors"
expect_failure "--loss-scale 0" "--loss-scale '0' is not none, dynamic or a positive number a float can hold" \
  "${IMG[@]}" --output-dir "$T/bad" --loss-scale 0
expect_failure "--loss-scale dynamc" "--loss-scale 'dynamc'" "${IMG[@]}" --output-dir "$T/bad" --loss-scale dynamc
SCALETRAIN_INJECT_OVERFLOW=x expect_failure "a bad test hook" "SCALETRAIN_INJECT_OVERFLOW='x' is not STEP[-LAST][:RANK[:after|:loss]]" \
  "${IMG[@]}" --output-dir "$T/bad" --loss-scale dynamic
echo "PASS"
