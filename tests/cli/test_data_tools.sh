#!/usr/bin/env bash
# scaletrain-data end to end: help and usage errors, synthetic and Fashion-MNIST conversion (one
# process and under mpirun, with identical results), inspect (text and JSON), and every kind of
# bad dataset giving a non-zero exit and a message that names the file.
# Env (set by ctest): ST_BIN (build/bin), ST_SOURCE (repository), ST_TMP (scratch).
set -euo pipefail

BIN=${ST_BIN:?}/scaletrain-data
W=${ST_TMP:?}/data_tools
PY=/usr/bin/python3
MPIRUN=(mpirun --oversubscribe -np 2)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
rm -rf "$W"
mkdir -p "$W"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# expect_in TEXT NEEDLE...: every needle occurs in TEXT.
expect_in() {
  local text=$1
  shift
  for needle in "$@"; do
    grep -qF -- "$needle" <<<"$text" || fail "expected '$needle' in: $text"
  done
}
# expect_error CODE NEEDLES... -- COMMAND...: the command exits with CODE (any non-zero if CODE
# is 'nonzero') within 60 s and its output contains every needle.
expect_error() {
  local code=$1
  shift
  local needles=()
  while [ "$1" != "--" ]; do
    needles+=("$1")
    shift
  done
  shift
  local out rc=0
  out=$(timeout 60 "$@" 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || fail "'$*' succeeded; expected an error with ${needles[*]}"
  [ "$rc" -ne 124 ] || fail "'$*' timed out (hang)"
  if [ "$code" != nonzero ] && [ "$rc" -ne "$code" ]; then fail "'$*' exited $rc, expected $code: $out"; fi
  expect_in "$out" "${needles[@]}"
  echo "ok (exit $rc): $(head -n1 <<<"$out")"
}

echo "== help"
out=$("$BIN" --help)
expect_in "$out" "convert fashion-mnist" "synthetic" "inspect DIR" "bench DIR" "docs/dataset-format.md"
out=$("$BIN" convert --help)
expect_in "$out" "--source" "--output" "--shards" "--chunk-samples" "--overwrite"
out=$("$BIN" synthetic --help)
expect_in "$out" "--samples" "--val-samples" "--image-size" "--classes" "--shards" "--seed" "--task"
out=$("$BIN" inspect --help)
expect_in "$out" "--json"
out=$("$BIN" bench --help)
expect_in "$out" "--batch-size" "--augment" "--crop-padding" "--no-shuffle" "--no-drop-last" "--dump"

echo "== usage errors (exit 2)"
expect_error 2 "missing command" -- "$BIN"
expect_error 2 "unknown command 'frobnicate'" -- "$BIN" frobnicate
expect_error 2 "bogus" -- "$BIN" synthetic --bogus 1
expect_error 2 "required" "output" -- "$BIN" synthetic --samples 10 --image-size 4,4,1 --classes 2
expect_error 2 "--image-size" -- "$BIN" synthetic --samples 10 --image-size 4,4 --classes 2 --output "$W/x"
expect_error 2 "unknown dataset 'mnist'" -- "$BIN" convert mnist --output "$W/x"
expect_error 2 "unknown --task" -- "$BIN" synthetic --task detection --samples 10 --image-size 4,4,1 --classes 2 --output "$W/x"

echo "== synthetic, one process and two ranks"
out=$("$BIN" synthetic --samples 203 --image-size 8,6,3 --classes 5 --shards 3 --seed 7 --chunk-samples 16 --output "$W/syn1")
expect_in "$out" "split train: 203 samples in 3 shards" "8x6x3" "5 classes" "split val: 20 samples in 3 shards"
for f in train/shard-00000-of-00003.h5 train/shard-00002-of-00003.h5 val/shard-00002-of-00003.h5; do
  [ -f "$W/syn1/$f" ] || fail "missing $W/syn1/$f"
done
"${MPIRUN[@]}" "$BIN" synthetic --samples 203 --image-size 8,6,3 --classes 5 --shards 3 --seed 7 --output "$W/syn2" >/dev/null
# Same seed: same samples, whoever wrote them (chunking differs, data must not).
for f in train/shard-00000-of-00003.h5 train/shard-00001-of-00003.h5 val/shard-00000-of-00003.h5; do
  for d in images labels; do
    a=$(h5dump -d /$d -y -w 0 "$W/syn1/$f" | sed -n '/DATA {/,$p')
    b=$(h5dump -d /$d -y -w 0 "$W/syn2/$f" | sed -n '/DATA {/,$p')
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "$f /$d differs between 1 and 2 ranks"
  done
done
# h5dump reads our files; images are chunked along the sample dimension.
h5dump -p -H -d /images "$W/syn1/train/shard-00000-of-00003.h5" | grep -q "CHUNKED ( 16, 8, 6, 3 )" ||
  fail "images not chunked as (16, 8, 6, 3)"
out=$("$BIN" synthetic --samples 20 --val-samples 3 --image-size 4,4,1 --classes 2 --output "$W/syn3")
expect_in "$out" "split train: 20 samples in 1 shard," "split val: 3 samples in 1 shard,"
# No silent mixing with old shards.
expect_error 1 "already holds shards" "--overwrite" -- "$BIN" synthetic --samples 20 --image-size 4,4,1 --classes 2 --output "$W/syn3"
out=$("$BIN" synthetic --samples 30 --image-size 4,4,1 --classes 2 --output "$W/syn3" --overwrite)
expect_in "$out" "split train: 30 samples in 1 shard,"

echo "== inspect"
out=$("$BIN" inspect "$W/syn1")
expect_in "$out" "split train: 203 samples in 3 shards" "$W/syn1/train/shard-00000-of-00003.h5  67 samples" "$W/syn1/train/shard-00001-of-00003.h5  68 samples" \
  "split val: 20 samples" "mean [" "std ["
json=$("$BIN" inspect "$W/syn1" --json)
$PY -c '
import json, sys
d = json.loads(sys.stdin.read())
t = d["splits"]["train"]
assert t["samples"] == 203 and [t["height"], t["width"], t["channels"]] == [8, 6, 3], t
assert t["num_classes"] == 5 and len(t["mean"]) == 3 and len(t["shards"]) == 3, t
assert sum(s["samples"] for s in t["shards"]) == 203
assert d["splits"]["val"]["samples"] == 20
' <<<"$json" || fail "inspect --json: $json"

echo "== bench: the loader over two ranks"
out=$("${MPIRUN[@]}" "$BIN" bench "$W/syn1" --batch-size 16 --epochs 2 --augment --crop-padding 2)
# floor(203 / 2) = 101 samples per rank -> 6 full batches of 16.
expect_in "$out" "bench $W/syn1/train: 2 ranks, batch 16, 2 epochs, 6 steps per epoch" "samples/s per rank" \
  "rank 0: 192 samples"

echo "== convert fashion-mnist"
FM=/usr/share/datasets/fashion-mnist
if [ -d "$FM" ]; then
  out=$("${MPIRUN[@]}" "$BIN" convert fashion-mnist --source "$FM" --output "$W/fm" --shards 3 --chunk-samples 128)
  expect_in "$out" "split train: 60000 samples in 3 shards" "28x28x1" "10 classes" "split val: 10000 samples in 3 shards" \
    "mean [0.286041]" "std [0.353024]"
  out=$("$BIN" inspect "$W/fm")
  expect_in "$out" "$W/fm/train/shard-00002-of-00003.h5  20000 samples" "$W/fm/val/shard-00000-of-00003.h5  3333 samples"
  expect_error 1 "no train-images-idx3-ubyte" "$W/syn1" -- "$BIN" convert fashion-mnist --source "$W/syn1" --output "$W/fm2"
else
  echo "SKIP: $FM not installed (make deps installs dataset-fashion-mnist)"
fi

echo "== bad datasets: non-zero exit, message names the file"
expect_error 1 "$W/nowhere" "does not exist" -- "$BIN" inspect "$W/nowhere"
mkdir -p "$W/empty"
expect_error 1 "$W/empty" "is empty" -- "$BIN" inspect "$W/empty"
mkdir -p "$W/noshards/train"
expect_error 1 "$W/noshards/train" "no *.h5 shard files" -- "$BIN" inspect "$W/noshards"

# bad_copy NAME: a fresh copy of the 3-shard synthetic dataset at $W/NAME, without its manifests,
# like a dataset written with h5py: what HDF5 and our checks find inside the files. (With a
# manifest, an edited shard is refused for its size first: tests/cli/test_damaged_files.sh.)
bad_copy() {
  rm -rf "${W:?}/$1"
  cp -r "$W/syn1" "$W/$1"
  rm -f "$W/$1"/*/manifest.json
}
h5edit() { # h5edit FILE PYTHON: runs PYTHON with f = h5py.File(FILE, 'r+')
  $PY -c "import h5py, numpy as np
f = h5py.File('$1', 'r+')
$2
f.close()"
}
bad_copy nolabels
h5edit "$W/nolabels/train/shard-00001-of-00003.h5" "del f['labels']"
expect_error 1 "$W/nolabels/train/shard-00001-of-00003.h5" "missing dataset 'labels'" -- "$BIN" inspect "$W/nolabels"

bad_copy floatlabels
h5edit "$W/floatlabels/train/shard-00000-of-00003.h5" \
  "l = f['labels'][:]; del f['labels']; f['labels'] = l.astype('float32')"
expect_error 1 "$W/floatlabels/train/shard-00000-of-00003.h5" "'labels' has dtype float32, expected int32" -- \
  "$BIN" inspect "$W/floatlabels"

bad_copy range
h5edit "$W/range/val/shard-00001-of-00003.h5" "f['labels'][4] = 5"
expect_error 1 "$W/range/val/shard-00001-of-00003.h5" "label 5 of sample 4 is out of range [0, 5)" -- \
  "$BIN" inspect "$W/range"

bad_copy shapes
h5edit "$W/shapes/train/shard-00002-of-00003.h5" \
  "n = f['images'].shape[0]; del f['images']; f['images'] = np.zeros((n, 8, 7, 3), np.uint8)"
expect_error 1 "$W/shapes/train/shard-00002-of-00003.h5" "8x7x3" "8x6x3" "all shards of a split share H, W, C" -- \
  "$BIN" inspect "$W/shapes"

bad_copy truncated
f="$W/truncated/train/shard-00001-of-00003.h5"
truncate -s $(($(stat -c %s "$f") / 2)) "$f"
expect_error 1 "$f" "truncated" -- "$BIN" inspect "$W/truncated"

bad_copy nothdf5
echo "images,labels" >"$W/nothdf5/train/shard-00000-of-00003.h5"
expect_error 1 "$W/nothdf5/train/shard-00000-of-00003.h5" "not an HDF5 file" -- "$BIN" inspect "$W/nothdf5"

# Under mpirun every rank exits, non-zero, within seconds.
expect_error nonzero "$f" "truncated" -- "${MPIRUN[@]}" "$BIN" inspect "$W/truncated"

rm -rf "$W"
echo "PASS"
