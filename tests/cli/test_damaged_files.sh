#!/usr/bin/env bash
# Damaged files (issue 16), each made by a recipe on a file this test writes (offset and bytes, no
# binary blobs): every run stops within seconds on every rank with a message naming the file, or
# reads on where the damage is in pixels only; none crashes or hangs.
#  - the manifest: sizes at open (cut short, grown, unlisted, missing), checksums by `verify` (over
#    ranks) and `train --verify-data`, staging of a damaged source;
#  - the cases libhdf5 1.10.8 crashed or hung on before (a byte of a root attribute, a checkpoint
#    with 8 bytes overwritten, zeroed bytes in a JPEG shard's data): now refused by HDF5's own
#    metadata checksums, by the checkpoint's seal, or harmless in the flat JPEG layout.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/damaged_files
rm -rf "$T" && mkdir -p "$T"
MPI2=(timeout 60 mpirun -np 2 --oversubscribe)

"$BIN/scaletrain-data" synthetic --samples 512 --val-samples 64 --image-size 8,8,3 --classes 4 --shards 4 \
  --output "$T/data" >/dev/null
copy() { rm -rf "${T:?}/$1" && cp -r "$T/data" "$T/$1"; }
# poke FILE OFFSET HEX: writes the bytes HEX at OFFSET (the recipe of a damaged byte range).
poke() { $PY -c "import sys; f = open(sys.argv[1], 'r+b'); f.seek(int(sys.argv[2])); f.write(bytes.fromhex(sys.argv[3]))" "$@"; }
# offset_of FILE TEXT [AFTER]: the offset of the first TEXT in FILE's bytes (plus AFTER).
offset_of() { $PY -c "import sys; print(open(sys.argv[1], 'rb').read().index(sys.argv[2].encode()) + int(sys.argv[3]))" "$1" "$2" "${3:-0}"; }
# dataset_offset FILE NAME: the file offset of a dataset's first byte (contiguous, or its first chunk).
dataset_offset() {
  $PY -c "import h5py, sys
d = h5py.File(sys.argv[1], 'r')[sys.argv[2]]
print(d.id.get_offset() if d.chunks is None else d.id.get_chunk_info(0).byte_offset)" "$1" "$2"
}
# no_crash NAME CMD...: CMD ends within 60 s by itself (exit 0, or 1 naming the file in $file).
no_crash() {
  local name=$1 out rc=0
  shift
  out=$(timeout 60 "$@" 2>&1) || rc=$?
  [ "$rc" -ne 124 ] || fail "$name: hung"
  [ "$rc" -lt 128 ] || fail "$name: killed by a signal (exit $rc): $out"
  [ "$rc" -eq 0 ] || grep -qF -- "$file" <<<"$out" || fail "$name: exit $rc without naming $file: $out"
  echo "ok: $name (exit $rc)"
}

echo "== the manifest: sizes at open"
jq_shards() { $PY -c "import json, sys; print(len(json.load(open(sys.argv[1]))['shards']))" "$1"; }
[ "$(jq_shards "$T/data/train/manifest.json")" -eq 4 ] || fail "synthetic wrote no manifest of 4 shards"
copy cut
file=$T/cut/train/shard-00002-of-00004.h5
size=$(stat -c %s "$file")
truncate -s $((size - 1000)) "$file"
expect_failure "a shard cut short" "$file is damaged: $((size - 1000)) bytes, $T/cut/train/manifest.json records $size (cut short or still being copied)" \
  "${MPI2[@]}" "$BIN/scaletrain-data" inspect "$T/cut"
copy stray
cp "$T/stray/train/shard-00000-of-00004.h5" "$T/stray/train/shard-00000-of-00004-copy.h5"
expect_failure "a shard the manifest does not list" "shard-00000-of-00004-copy.h5 is not listed in $T/stray/train/manifest.json" \
  "$BIN/scaletrain-data" inspect "$T/stray"
copy missing
rm "$T/missing/val/shard-00001-of-00004.h5"
expect_failure "a listed shard that is missing" "lists shard shard-00001-of-00004.h5, which is missing" \
  "$BIN/scaletrain-data" inspect "$T/missing"
copy badmanifest
echo '{"format": "scaletrain-manifest", "version": 1, "checksum": "xxh3-64", "shards": [{"file": 3' \
  >"$T/badmanifest/train/manifest.json"
expect_failure "a damaged manifest" "dataset manifest $T/badmanifest/train/manifest.json is damaged or not a manifest" \
  "$BIN/scaletrain-data" inspect "$T/badmanifest"

echo "== checksums: verify, --verify-data, staging"
out=$("${MPI2[@]}" "$BIN/scaletrain-data" verify "$T/data") || fail "verify of a whole dataset: $out"
grep -qF "split train: 4 shards" <<<"$out" && grep -qF "all match $T/data/train/manifest.json" <<<"$out" ||
  fail "verify output: $out"
# The manifest's hashes are xxhsum's (checked independently of scaletrain).
want=$($PY -c "import json, sys; m = json.load(open(sys.argv[1])); print(m['shards'][1]['xxh3'])" "$T/data/train/manifest.json")
[ "$(xxhsum -H3 "$T/data/train/shard-00001-of-00004.h5" | sed 's/.* = //')" = "$want" ] || fail "manifest hash != xxhsum -H3"
copy flipped
file=$T/flipped/train/shard-00003-of-00004.h5
poke "$file" $(($(dataset_offset "$file" images) + 100)) ff  # one pixel: HDF5 cannot see it
expect_failure "verify names the damaged shard (2 ranks)" "DAMAGED $file" \
  "${MPI2[@]}" "$BIN/scaletrain-data" verify "$T/flipped"
json=$("$BIN/scaletrain-data" verify "$T/flipped" --json 2>/dev/null) && fail "verify --json exited 0 on damage"
$PY -c "
import json, sys
r = json.load(sys.stdin)
assert r['damaged'] == 1 and r['splits']['train']['shards'] == 4, r
assert r['splits']['train']['damaged'][0].startswith(sys.argv[1] + ': '), r
assert r['splits']['val']['damaged'] == [] and r['splits']['train']['bytes'] > 0, r" "$file" <<<"$json" ||
  fail "verify --json: $json"
TRAIN=(train --model resnet20 --epochs 1 --batch-size 16 --threads 1 --max-steps 2)
expect_failure "train --verify-data" "--verify-data: 1 damaged shard in $T/flipped/train" \
  "${MPI2[@]}" "$BIN/scaletrain" "${TRAIN[@]}" --data "$T/flipped" --output-dir "$T/o1" --verify-data
expect_failure "eval --verify-data" "--verify-data: 1 damaged shard in $T/flipped/val" \
  bash -c "cp $file $T/flipped/val/shard-00000-of-00004.h5 && exec ${MPI2[*]} $BIN/scaletrain eval --model resnet20 --data $T/flipped --checkpoint $T/none.h5 --verify-data"
copy flipped2
poke "$T/flipped2/train/shard-00003-of-00004.h5" $(($(dataset_offset "$T/flipped2/train/shard-00003-of-00004.h5" images) + 100)) ff
expect_failure "staging a damaged source" "does not match its checksum" \
  "${MPI2[@]}" "$BIN/scaletrain" "${TRAIN[@]}" --data "$T/flipped2" --output-dir "$T/o2" --stage-to "$T/stage"
out=$("${MPI2[@]}" "$BIN/scaletrain" "${TRAIN[@]}" --data "$T/data" --output-dir "$T/o3" --verify-data 2>&1) ||
  fail "--verify-data on whole data: $out"
grep -qF "verified $T/data/train: 4 shards" <<<"$out" || fail "no verification line: $out"

echo "== what used to crash or hang libhdf5"
# A byte of a root attribute's value: HDF5 1.10's object-header checksum refuses it (the manifest
# cannot: the size is unchanged).
copy attr
file=$T/attr/train/shard-00001-of-00004.h5
poke "$file" "$(offset_of "$file" image_classification 3)" 58
# Rank 0 alone opens the shards; the other waits for its verdict, so both end with rank 0's
# message and neither calls MPI_Abort (which hung here once, the other rank in MPI_Finalize).
expect_agreed_failure "a changed byte in a root attribute" "$file" "${MPI2[@]}" "$BIN/scaletrain-data" inspect "$T/attr"
for off in 0 40 200 600 1200 2400; do  # a byte at several places of the metadata
  copy meta
  file=$T/meta/val/shard-00000-of-00004.h5
  poke "$file" "$off" a5
  no_crash "a changed byte at offset $off of a shard" "$BIN/scaletrain-data" inspect "$T/meta"
done
# A few hundred zeroed bytes in a JPEG shard's data (the global-heap decoder looped forever on
# those in format 1): in the flat layout they are pixels of one sample, which decodes or is
# refused naming the shard and the sample.
mkdir -p "$T/jpegsrc/train/n01" "$T/jpegsrc/train/n02" "$T/jpegsrc/val/n01"
$PY -c "
import sys, numpy as np
from PIL import Image
r = np.random.default_rng(0)
for d, n in (('train/n01', 4), ('train/n02', 4), ('val/n01', 2)):
    for i in range(n):
        Image.fromarray(r.integers(0, 255, (48, 40, 3), dtype=np.uint8)).save(f'{sys.argv[1]}/{d}/{i}.JPEG', quality=90)
" "$T/jpegsrc"
"$BIN/scaletrain-data" convert imagenet --source "$T/jpegsrc" --output "$T/jpeg" --encoding jpeg >/dev/null
file=$T/jpeg/train/shard-00000-of-00001.h5
poke "$file" $(($(dataset_offset "$file" jpeg) + 2000)) "$($PY -c 'print("00" * 300)')"
"$BIN/scaletrain-data" manifest "$T/jpeg" >/dev/null  # damage past the manifest: only the pixels are left to notice it
no_crash "300 zeroed bytes in a JPEG shard's data" "${MPI2[@]}" "$BIN/scaletrain-data" bench "$T/jpeg" --batch-size 2 \
  --image-size 16,16 --no-shuffle
# A checkpoint with 8 bytes overwritten in the middle (a segfault in H5Lexists before): its seal.
"$BIN/scaletrain" "${TRAIN[@]}" --data "$T/data" --output-dir "$T/run" >/dev/null 2>&1 || fail "training run"
ckpt=$T/run/checkpoints/$(cat "$T/run/checkpoints/latest")
cp "$ckpt" "$T/damaged.h5"
poke "$T/damaged.h5" $(($(stat -c %s "$ckpt") / 2)) 4141414141414141
expect_failure "a checkpoint with 8 bytes overwritten" "checkpoint $T/damaged.h5 is damaged: its bytes have XXH3-64" \
  "${MPI2[@]}" "$BIN/scaletrain" eval --model resnet20 --data "$T/data" --checkpoint "$T/damaged.h5"
rm -rf "$T"
echo "PASS: damaged files"
