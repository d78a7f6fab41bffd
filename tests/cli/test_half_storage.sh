#!/usr/bin/env bash
# 16-bit storage under a mixed precision (Context::activation_dtype, ops/op.hpp), real ranks and
# files: every model family trained and evaluated with activations and their gradients in f16 or
# bf16 tensors ends with the bits of the same run with them in fp32 tensors holding the 16-bit
# values (SCALETRAIN_AMP_STORAGE=f32, the emulation the AMP tests were written against):
#  - resnet20 (convolution, batch norm, residual adds, pooling) in amp-fp16 and amp-bf16, with
#    the evaluation's top-1;
#  - transformer-tiny (layer norm, attention, token embedding and loss) in amp-bf16, with its
#    BLEU evaluation (greedy decoding reads the 16-bit logits on the host);
#  - ncf (embeddings, concatenation, products, BCE) in amp-fp16, with its HR@10 evaluation.
# And report.json's activation_dtype and the start-up line say which storage ran.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/half_storage
rm -rf "$T" && mkdir -p "$T"
CK=("$PY" "$(dirname "$0")/checkpoints.py")

# run NAME STORAGE CMD...: the run with SCALETRAIN_AMP_STORAGE=STORAGE into $T/NAME-STORAGE.
run() {
  local name=$1 storage=$2
  shift 2
  SCALETRAIN_AMP_STORAGE=$storage "$@" --output-dir "$T/$name-$storage" >"$T/$name-$storage.log" ||
    fail "$name ($storage): $(tail -n 5 "$T/$name-$storage.log")"
}

# same NAME DTYPE PATTERN: the two storages' checkpoints bitwise equal, their evaluation lines
# (PATTERN) equal, and the 16-bit run's report and start-up line naming DTYPE.
same() {
  local name=$1 dtype=$2 pattern=$3
  "${CK[@]}" same "$T/$name-16" "$T/$name-f32"
  local a b
  a=$(grep -o "$pattern" "$T/$name-16.log") || fail "$name: no '$pattern' in $T/$name-16.log"
  b=$(grep -o "$pattern" "$T/$name-f32.log") || fail "$name: no '$pattern' in $T/$name-f32.log"
  [ "$a" = "$b" ] || fail "$name: evaluations differ: $a / $b"
  $PY - "$T/$name-16/report.json" "$T/$name-f32/report.json" "$dtype" <<'PY'
import json, sys
half, wide = (json.load(open(p))["activation_dtype"] for p in sys.argv[1:3])
assert half == sys.argv[3] and wide == "float32", (half, wide)
PY
  grep -q "^precision: .*activations and their gradients stored in [a-z0-9]* tensors" "$T/$name-16.log" ||
    fail "$name: no 16-bit storage in the precision line: $(grep '^precision' "$T/$name-16.log")"
  grep -q "^precision: .*kept as fp32 holding .* values (SCALETRAIN_AMP_STORAGE=f32)" "$T/$name-f32.log" ||
    fail "$name: the hook's precision line: $(grep '^precision' "$T/$name-f32.log")"
  echo "ok: $name: the same bits in $dtype tensors as in fp32 ones ($a)"
}

"$BIN/scaletrain-data" synthetic --samples 640 --val-samples 64 --image-size 16,16,3 --classes 5 --shards 2 \
  --output "$T/images" >/dev/null
IMG=(timeout 300 mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/images"
  --batch-size 16 --threads 1 --epochs 1 --max-steps 12 --log-every 0 --eval-every 1)
for p in amp-fp16 amp-bf16; do
  for s in 16 f32; do run "resnet20-$p" "$s" "${IMG[@]}" --precision "$p"; done
done
same resnet20-amp-fp16 float16 "val top-1 [0-9.]*%"
same resnet20-amp-bf16 bfloat16 "val top-1 [0-9.]*%"

"$BIN/scaletrain-data" synthetic --task translation --kind reverse --sentences 400 --val-sentences 8 --words 20 \
  --max-length 10 --seed 3 --output "$T/text" >/dev/null
TXT=(timeout 300 mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model transformer-tiny --data "$T/text"
  --batch-tokens 256 --threads 1 --epochs 1 --max-steps 6 --log-every 0 --eval-every 1 --precision amp-bf16)
for s in 16 f32; do run transformer "$s" "${TXT[@]}"; done
same transformer bfloat16 "val bleu [0-9.]*"

"$BIN/scaletrain-data" synthetic --task recommendation --users 300 --items 400 --groups 10 --positives-per-user 8 \
  --eval-negatives 20 --output "$T/ratings" >/dev/null
NCF=(timeout 300 mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model ncf --data "$T/ratings"
  --batch-size 128 --threads 1 --epochs 1 --max-steps 6 --log-every 0 --eval-every 1 --precision amp-fp16)
for s in 16 f32; do run ncf "$s" "${NCF[@]}"; done
same ncf float16 "val hr@10 [0-9.]*"
echo "PASS"
