#!/usr/bin/env bash
# --input-copy (train/device_batches.hpp) with real ranks, files and the loader, on the CPU:
#  - overlap (the double-buffered source: each batch copied into one of two buffers, the host
#    source asked one batch ahead) trains to the same bits as the default (auto: the loader's
#    batches used where they are), over an epoch boundary;
#  - a run stopped mid-epoch and resumed with overlap ends with those bits too (the resumed epoch
#    starts at its step);
#  - report.json's data.input_copy says what was asked and what ran, and what the upload did; the
#    start-up line says it;
#  - ncf's batches (users, items, labels) the same way;
#  - a bad value is refused, naming the option.
# On a GPU, overlap is the default; gpu.resnet20_training compares it with inline there, and
# gpu.observability shows the copy running beside compute.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/input_copy
rm -rf "$T" && mkdir -p "$T"
CK=("$PY" "$(dirname "$0")/checkpoints.py")

# 320 samples, global batch 32: 10 steps an epoch; 2 epochs.
"$BIN/scaletrain-data" synthetic --samples 320 --val-samples 32 --image-size 16,16,3 --classes 5 --shards 2 \
  --output "$T/images" >/dev/null
RUN=(timeout 300 mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/images"
  --batch-size 16 --threads 1 --epochs 2 --log-every 0 --eval-every 0)

report_check() {
  $PY - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
c = r["data"]["input_copy"]
assert eval(sys.argv[2]), (sys.argv[2], c)
PY
}

echo "== overlap trains to the bits of the default, over an epoch boundary"
"${RUN[@]}" --output-dir "$T/auto" >"$T/auto.log"
"${RUN[@]}" --output-dir "$T/overlap" --input-copy overlap >"$T/overlap.log"
"${CK[@]}" same "$T/auto" "$T/overlap"
grep -q "^input: .*; batches used in host memory$" "$T/auto.log" || fail "auto's input line: $(grep '^input' "$T/auto.log")"
grep -q "^input: .*; each batch copied into one of 2 host buffers (--input-copy overlap; nothing to overlap on the CPU)$" \
  "$T/overlap.log" || fail "overlap's input line: $(grep '^input' "$T/overlap.log")"
report_check "$T/auto" 'c == dict(requested="auto", used="none", buffers=None, batches=None, copies=None, serialized=None, bytes=None)'
# 20 batches of 16 images of 16x16x3 bytes and 16 int32 labels: two copies each; each buffer's
# memory fresh once.
report_check "$T/overlap" 'c == dict(requested="overlap", used="overlap", buffers=2, batches=20, copies=40, serialized=2, bytes=20 * 16 * (768 + 4))'
echo "ok: the same checkpoint; report and start-up lines"

echo "== stopped at step 6 and resumed with overlap: the same end"
"${RUN[@]}" --output-dir "$T/resumed" --input-copy overlap --max-steps 6 >"$T/first.log"
"${RUN[@]}" --output-dir "$T/resumed" --input-copy overlap --resume auto >"$T/second.log"
"${CK[@]}" same "$T/auto" "$T/resumed"
# The resumed segment copied its 14 batches.
report_check "$T/resumed" 'c["batches"] == 14'
echo "ok: resumed mid-epoch, bitwise"

echo "== ncf (users, items and labels copied ahead): the same bits too"
"$BIN/scaletrain-data" synthetic --task recommendation --users 200 --items 300 --groups 10 --positives-per-user 8 \
  --eval-negatives 20 --output "$T/ratings" >/dev/null
NCF=(timeout 300 mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model ncf --data "$T/ratings" --batch-size 64
  --threads 1 --epochs 2 --log-every 0 --eval-every 0)
"${NCF[@]}" --output-dir "$T/ncf-auto" >"$T/ncf-auto.log"
"${NCF[@]}" --output-dir "$T/ncf-overlap" --input-copy overlap >"$T/ncf-overlap.log"
"${CK[@]}" same "$T/ncf-auto" "$T/ncf-overlap"
report_check "$T/ncf-overlap" 'c["used"] == "overlap" and c["copies"] == 3 * c["batches"] and c["serialized"] == 2'
echo "ok: ncf"

echo "== a bad value"
BAD=("$BIN/scaletrain" train --model resnet20 --data "$T/images" --output-dir "$T/bad" --input-copy sideways)
expect_failure "--input-copy sideways" "unknown --input-copy 'sideways' (known: auto, overlap, inline)" "${BAD[@]}"
