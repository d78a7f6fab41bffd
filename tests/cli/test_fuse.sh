#!/usr/bin/env bash
# --fuse bn-add-relu (issue 26, section 3): each residual block ends with one op for its last
# batch norm, the shortcut's add and the ReLU (ops::batch_norm_add_relu_forward_training), with
# real ranks and files on the CPU, the reference for cuDNN's fused kernel:
#  - resnet20 (basic blocks) and resnet50 (bottlenecks) in fp32: the same checkpoint, bit for bit,
#    as the three ops, the evaluation included;
#  - resnet20 in amp-bf16: one rounding instead of three, so the runs differ (the rounding is
#    real) but the first step's loss agrees within 1%; and 16-bit storage gives the bits of fp32
#    tensors holding the values (SCALETRAIN_AMP_STORAGE=f32) with the fusion too;
#  - the start-up line, report.json's config.fuse (as asked) and fuse (as it ran); the default,
#    auto, fuses nothing on the CPU, amp-fp16 included (it fuses amp-fp16 on a GPU: gpu.amp_training);
#    a model without residual blocks says the option has no effect; a bad value is refused.
#  - --fuse conv-bias-relu (a convolution with bias and its ReLU as one op): alexnet's checkpoint
#    the same bits as the two ops in fp32 and amp-bf16; both fusions asked of resnet20.
#  - --fuse bn-relu (a batch norm and its ReLU as one op): resnet20's checkpoint the same bits as
#    the two ops in fp32, amp-fp16 and amp-bf16; resnet50 with both batch-norm fusions the same
#    bits as with bn-add-relu alone; ncf says it has no effect.
# On a GPU, gpu.half_storage checks cuDNN's fused kernel against the three ops, and
# gpu.backend_ops(_amp) the fused convolution epilogue against the CPU.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/fuse
rm -rf "$T" && mkdir -p "$T"
CK=("$PY" "$(dirname "$0")/checkpoints.py")

"$BIN/scaletrain-data" synthetic --samples 640 --val-samples 64 --image-size 16,16,3 --classes 5 --shards 2 \
  --output "$T/images" >/dev/null
IMG=(timeout 300 mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/images"
  --batch-size 16 --threads 1 --epochs 1 --max-steps 12 --log-every 1 --eval-every 1)

echo "== fp32: the fused op gives the bits of the three ops"
"${IMG[@]}" --output-dir "$T/none" >"$T/none.log"
"${IMG[@]}" --output-dir "$T/fused" --fuse bn-add-relu >"$T/fused.log"
"${CK[@]}" same "$T/none" "$T/fused"
grep -q "^fusion: each residual block ends with one op for batch norm, the shortcut's add and the ReLU" \
  "$T/fused.log" || fail "no fusion line: $(grep -n fusion "$T/fused.log")"
! grep -q "^fusion:" "$T/none.log" || fail "a fusion line without --fuse"
$PY - "$T/fused/report.json" "$T/none/report.json" <<'PY'
import json, sys
f, n = (json.load(open(p)) for p in sys.argv[1:3])
assert f["config"]["fuse"] == "bn-add-relu" and n["config"]["fuse"] == "auto", (f["config"]["fuse"], n["config"]["fuse"])
assert f["fuse"] == "bn-add-relu" and n["fuse"] == "none", (f["fuse"], n["fuse"])
assert f["final_val_accuracy"] == n["final_val_accuracy"], (f["final_val_accuracy"], n["final_val_accuracy"])
PY
echo "ok: resnet20"

"$BIN/scaletrain-data" synthetic --samples 16 --val-samples 8 --image-size 32,32,3 --classes 4 --shards 1 \
  --output "$T/big" >/dev/null
R50=(timeout 300 "$BIN/scaletrain" train --model resnet50 --data "$T/big" --batch-size 4 --threads 2 --epochs 1
  --max-steps 2 --log-every 0 --eval-every 0)
"${R50[@]}" --output-dir "$T/r50-none" >"$T/r50-none.log"
"${R50[@]}" --output-dir "$T/r50-fused" --fuse bn-add-relu >"$T/r50-fused.log"
"${CK[@]}" same "$T/r50-none" "$T/r50-fused"
echo "ok: resnet50 (bottlenecks)"

echo "== amp-bf16: one rounding instead of three"
"${IMG[@]}" --precision amp-bf16 --output-dir "$T/amp-none" >"$T/amp-none.log"
"${IMG[@]}" --precision amp-bf16 --output-dir "$T/amp-fused" --fuse bn-add-relu >"$T/amp-fused.log"
SCALETRAIN_AMP_STORAGE=f32 "${IMG[@]}" --precision amp-bf16 --output-dir "$T/amp-fused-f32" --fuse bn-add-relu \
  >"$T/amp-fused-f32.log"
"${CK[@]}" same "$T/amp-fused" "$T/amp-fused-f32"
if "${CK[@]}" same "$T/amp-none" "$T/amp-fused" >/dev/null 2>&1; then fail "amp-bf16: fused = unfused bitwise"; fi
$PY - "$T/amp-none.log" "$T/amp-fused.log" <<'PY'
import re, sys
a, b = (float(re.search(r"step 1/\d+  loss ([0-9.]+)", open(p).read()).group(1)) for p in sys.argv[1:3])
assert abs(a - b) <= 0.01 * a, (a, b)
print(f"ok: first loss {a} unfused, {b} fused")
PY

echo "== --fuse auto on the CPU: nothing fused, amp-fp16 included"
timeout 300 "$BIN/scaletrain" train --model resnet20 --data "$T/images" --batch-size 16 --threads 1 --epochs 1 \
  --max-steps 1 --log-every 0 --eval-every 0 --precision amp-fp16 --output-dir "$T/auto-fp16" >"$T/auto-fp16.log"
! grep -q "^fusion:" "$T/auto-fp16.log" || fail "--fuse auto fused on the CPU: $(grep -n fusion "$T/auto-fp16.log")"
$PY -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["fuse"] == "none", r["fuse"]' \
  "$T/auto-fp16/report.json"

echo "== --fuse conv-bias-relu: a convolution with bias and its ReLU as one op, the same bits on the CPU"
# The CPU's fused op computes conv + bias, then the ReLU, in fp32 and rounds once; apart, conv + bias
# is rounded, then the ReLU (exact, and sign-preserving rounding commutes with it): the same bits in
# fp32 and in a mixed precision alike. alexnet at 64x64 (its adaptive pool makes 6x6 of anything).
"$BIN/scaletrain-data" synthetic --samples 96 --val-samples 16 --image-size 64,64,3 --classes 5 --shards 2 \
  --output "$T/alex" >/dev/null
ALEX=(timeout 300 mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model alexnet --data "$T/alex" --batch-size 8
  --threads 1 --epochs 1 --max-steps 4 --log-every 1 --eval-every 1)
for precision in fp32 amp-bf16; do
  "${ALEX[@]}" --precision $precision --output-dir "$T/alex-none-$precision" >"$T/alex-none-$precision.log"
  "${ALEX[@]}" --precision $precision --output-dir "$T/alex-fused-$precision" --fuse conv-bias-relu \
    >"$T/alex-fused-$precision.log"
  "${CK[@]}" same "$T/alex-none-$precision" "$T/alex-fused-$precision"
  grep -q "^fusion: each convolution with a bias and its ReLU run as one op (--fuse conv-bias-relu)" \
    "$T/alex-fused-$precision.log" || fail "alexnet $precision: $(grep -n fusion "$T/alex-fused-$precision.log")"
  $PY -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["fuse"] == "conv-bias-relu", r["fuse"]' \
    "$T/alex-fused-$precision/report.json"
done
echo "ok: alexnet, fp32 and amp-bf16"
# Both fusions asked of a model with only one kind: the start-up line says which has no effect.
timeout 300 "$BIN/scaletrain" train --model resnet20 --data "$T/images" --batch-size 16 --threads 1 --epochs 1 \
  --max-steps 1 --log-every 0 --eval-every 0 --fuse bn-add-relu,conv-bias-relu --output-dir "$T/both" >"$T/both.log"
grep -q "^fusion: each residual block ends with one op .*; --fuse conv-bias-relu has no effect: resnet20 has no convolution with a bias and a ReLU after it" \
  "$T/both.log" || fail "resnet20 with both: $(grep -n fusion "$T/both.log")"

echo "== --fuse bn-relu: a batch norm and its ReLU as one op, the same bits on the CPU"
# The CPU's fused op runs batch norm, then the ReLU, in fp32 and rounds once; apart, batch norm is
# rounded, then the ReLU: rounding keeps the sign, so the two agree in every precision (a value that
# rounds to -0 would be +0 fused and -0 apart: equal values, and no sum here tells them apart).
for precision in fp32 amp-fp16 amp-bf16; do
  "${IMG[@]}" --precision $precision --output-dir "$T/bnr-none-$precision" \
    >"$T/bnr-none-$precision.log"
  "${IMG[@]}" --precision $precision --output-dir "$T/bnr-fused-$precision" --fuse bn-relu \
    >"$T/bnr-fused-$precision.log"
  "${CK[@]}" same "$T/bnr-none-$precision" "$T/bnr-fused-$precision"
  grep -q "^fusion: each batch norm with a ReLU after it runs as one op (--fuse bn-relu)" \
    "$T/bnr-fused-$precision.log" || fail "resnet20 $precision: $(grep -n fusion "$T/bnr-fused-$precision.log")"
done
echo "ok: resnet20, fp32, amp-fp16 and amp-bf16"
# Both batch-norm fusions on the bottlenecks: the same bits as bn-add-relu alone.
"${R50[@]}" --output-dir "$T/r50-both" --fuse bn-add-relu,bn-relu >"$T/r50-both.log"
"${CK[@]}" same "$T/r50-fused" "$T/r50-both"
$PY -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["fuse"] == "bn-add-relu,bn-relu", r["fuse"]' \
  "$T/r50-both/report.json"
echo "ok: resnet50 with bn-add-relu,bn-relu"

echo "== no residual blocks, and a bad value"
"$BIN/scaletrain-data" synthetic --task recommendation --users 100 --items 150 --groups 5 --positives-per-user 4 \
  --eval-negatives 10 --output "$T/ratings" >/dev/null
timeout 300 "$BIN/scaletrain" train --model ncf --data "$T/ratings" --batch-size 64 --threads 1 --epochs 1 \
  --max-steps 2 --log-every 0 --eval-every 0 --fuse bn-add-relu --output-dir "$T/ncf" >"$T/ncf.log"
grep -q "^fusion: --fuse bn-add-relu has no effect: ncf has no residual blocks" "$T/ncf.log" ||
  fail "ncf: $(grep -n fusion "$T/ncf.log")"
timeout 300 "$BIN/scaletrain" train --model ncf --data "$T/ratings" --batch-size 64 --threads 1 --epochs 1 \
  --max-steps 1 --log-every 0 --eval-every 0 --fuse bn-relu --output-dir "$T/ncf-bnr" >"$T/ncf-bnr.log"
grep -q "^fusion: --fuse bn-relu has no effect: ncf has no batch norm with a ReLU after it" "$T/ncf-bnr.log" ||
  fail "ncf: $(grep -n fusion "$T/ncf-bnr.log")"
BAD=("$BIN/scaletrain" train --model resnet20 --data "$T/images" --output-dir "$T/bad" --fuse everything)
expect_failure "--fuse everything" \
  "unknown --fuse 'everything' (known: auto, none, or a comma list of bn-add-relu, bn-relu, conv-bias-relu)" "${BAD[@]}"
BAD=("$BIN/scaletrain" train --model resnet20 --data "$T/images" --output-dir "$T/bad" --fuse bn-add-relu,none)
expect_failure "--fuse bn-add-relu,none" \
  "unknown --fuse 'bn-add-relu,none' (known: auto, none, or a comma list of bn-add-relu, bn-relu, conv-bias-relu)" "${BAD[@]}"
echo "PASS"
