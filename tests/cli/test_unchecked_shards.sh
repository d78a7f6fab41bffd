#!/usr/bin/env bash
# Unchecked shards (issue 28): shards written by h5py with HDF5's default (oldest) file format have
# metadata without checksums, so a damaged one reaches libhdf5's parser unchecked. Written here
# exactly as docs/dataset-format.md's raw example does (no manifest), they are named in the
# training start-up warning, by inspect (text and --json) and in report.json; damaged, they are
# refused by --require-checksums (no manifest, or unchecksummed metadata without --verify-data)
# and, with a manifest written before the damage, by --verify-data, before any HDF5 call on them:
# on a shard libhdf5 could not open at all, on every read path (each --io, --stage-to, JPEG
# shards, the recommendation task, eval, inspect; the train or the val split).
# Shards with checksummed metadata (h5py libver, scaletrain-data synthetic) are not warned about.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/unchecked_shards
rm -rf "$T" && mkdir -p "$T"
MPI2=(timeout 120 mpirun -np 2 --oversubscribe)
TRAIN=(train --model resnet20 --epochs 1 --batch-size 16 --threads 1 --max-steps 2)

# write_h5py DIR [LIBVER [TASK]]: train/ and val/ of one raw shard each, as docs/dataset-format.md
# writes them (LIBVER: the h5py libver argument, e.g. "('v110', 'latest')"; none: h5py's default;
# TASK "str": the task attribute as a Python str, which h5py stores as a variable-length string;
# by default as fixed-length bytes, as the docs write it).
write_h5py() {
  $PY - "$1" "${2:-}" "${3:-bytes}" <<'PY'
import os, sys
import h5py, numpy as np
out, libver, task = sys.argv[1], sys.argv[2], sys.argv[3]
kw = {"libver": eval(libver)} if libver else {}
rng = np.random.default_rng(0)
K = 4
for split, n in (("train", 64), ("val", 32)):
    os.makedirs(f"{out}/{split}", exist_ok=True)
    images = rng.integers(0, 256, size=(n, 8, 8, 3), dtype=np.uint8)
    labels = rng.integers(0, K, size=n)
    with h5py.File(f"{out}/{split}/shard-00000-of-00001.h5", "w", **kw) as f:
        f.attrs["scaletrain_format"] = 2
        f.attrs["task"] = "image_classification" if task == "str" else np.bytes_("image_classification")
        f.attrs["num_classes"] = K
        f.attrs["mean"] = (images / 255.0).mean(axis=(0, 1, 2))
        f.attrs["std"] = (images / 255.0).std(axis=(0, 1, 2))
        f.create_dataset("images", data=images, chunks=(16,) + images.shape[1:])
        f.create_dataset("labels", data=labels.astype("int32"))
PY
}
# damage FILE: flips 4 bits in the HDF5 metadata right after the superblock (the root group's
# object header and its attributes), far from the raw data; the size stays the same.
damage() {
  $PY -c "
import sys
f = open(sys.argv[1], 'r+b')
for at in (120, 160, 200, 240):
    f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x10]))" "$1"
}
# no_crash NAME OUT RC: the refusal ended by itself, with an error, not a signal.
check_refusal() {
  local name=$1 rc=$2 out=$3
  shift 3
  [ "$rc" -ne 0 ] || fail "$name: exited 0: $out"
  [ "$rc" -ne 124 ] || fail "$name: hung"
  [ "$rc" -lt 128 ] || fail "$name: killed by a signal (exit $rc): $out"
  for want in "$@"; do grep -qF -- "$want" <<<"$out" || fail "$name: no '$want' in: $out"; done
  echo "ok: $name (exit $rc)"
}

echo "== h5py's default format, no manifest: warned about"
write_h5py "$T/plain"
shard=$T/plain/train/shard-00000-of-00001.h5
out=$("${MPI2[@]}" "$BIN/scaletrain" "${TRAIN[@]}" --data "$T/plain" --output-dir "$T/run" 2>&1) ||
  fail "training on h5py shards: $out"
[ "$(grep -c "1 shard has HDF5 metadata without checksums" <<<"$out")" -eq 2 ] ||
  fail "expected one warning per split (train, val) from rank 0 only: $out"
grep -qF "$T/plain/train: 1 shard has HDF5 metadata without checksums" <<<"$out" && grep -qF "  $shard" <<<"$out" &&
  grep -qF "scaletrain-data manifest $T/plain" <<<"$out" && grep -qF "libver=('v110', 'latest')" <<<"$out" &&
  grep -qF "scaletrain-data upgrade $T/plain --output NEW_DIR" <<<"$out" ||
  fail "the warning names the split, the shard and both ways out: $out"
echo "ok: the training start-up warning"
$PY -c "
import json, sys
d = json.load(open(sys.argv[1]))['dataset']['unchecked_shards']
assert d['count'] == 2 and sys.argv[2] in d['paths'], d" "$T/run/report.json" "$shard" || fail "report.json: no unchecked shards"
echo "ok: report.json"
out=$("$BIN/scaletrain-data" inspect "$T/plain") || fail "inspect: $out"
grep -qF "unchecked: 1 shard has HDF5 metadata without checksums" <<<"$out" && grep -qF "    $shard" <<<"$out" ||
  fail "inspect lists no unchecked shard: $out"
$PY -c "
import json, sys
r = json.load(sys.stdin)
assert r['splits']['train']['unchecked_shards'] == [sys.argv[1]], r" "$shard" \
  < <("$BIN/scaletrain-data" inspect "$T/plain" --json) || fail "inspect --json"
echo "ok: inspect (text and --json)"

echo "== damaged, --require-checksums refuses before libhdf5 opens it"
cp -r "$T/plain" "$T/damaged"
damage "$T/damaged/train/shard-00000-of-00001.h5"
rc=0
out=$("${MPI2[@]}" "$BIN/scaletrain" "${TRAIN[@]}" --data "$T/damaged" --output-dir "$T/r1" --require-checksums 2>&1) || rc=$?
check_refusal "train --require-checksums, no manifest" "$rc" "$out" \
  "--require-checksums: $T/damaged/train has no manifest.json" "scaletrain-data manifest $T/damaged"
rc=0
out=$(timeout 60 "$BIN/scaletrain-data" inspect "$T/damaged" --require-checksums 2>&1) || rc=$?
check_refusal "inspect --require-checksums, no manifest" "$rc" "$out" "--require-checksums: $T/damaged/train has no manifest.json"

echo "== damaged, the default path: the warning names it before libhdf5 parses it"
# libhdf5 1.10 may read out of bounds on this file (docs/reliability.md, "Unchecked shards"), which
# the sanitizer build reports: the default path runs in the normal build only.
if [ -z "${ASAN_OPTIONS:-}" ]; then
  rc=0
  out=$(timeout 60 "$BIN/scaletrain" "${TRAIN[@]}" --data "$T/damaged" --output-dir "$T/r0" 2>&1) || rc=$?
  [ "$rc" -ne 124 ] || fail "train on the damaged shard hung: $out"
  warned=$(grep -nF "HDF5 metadata without checksums" <<<"$out" | head -1 | cut -d: -f1)
  [ -n "$warned" ] && grep -qF "$T/damaged/train/shard-00000-of-00001.h5" <<<"$out" ||
    fail "no warning naming the damaged shard: $out"
  failed=$(grep -n "error:" <<<"$out" | head -1 | cut -d: -f1)
  [ -z "$failed" ] || [ "$warned" -lt "$failed" ] || fail "the warning comes after libhdf5's error: $out"
  echo "ok: the damaged shard is named before libhdf5 reads it (exit $rc)"
fi

echo "== a manifest written before the damage"
cp -r "$T/plain" "$T/listed"
"$BIN/scaletrain-data" manifest "$T/listed" >/dev/null
file=$T/listed/train/shard-00000-of-00001.h5
damage "$file"
rc=0
out=$("${MPI2[@]}" "$BIN/scaletrain" "${TRAIN[@]}" --data "$T/listed" --output-dir "$T/r2" --require-checksums 2>&1) || rc=$?
check_refusal "train --require-checksums, unchecksummed metadata" "$rc" "$out" \
  "1 shard of $T/listed/train has HDF5 metadata without checksums" "  $file" "add --verify-data" \
  "scaletrain-data upgrade $T/listed --output NEW_DIR"
rc=0
out=$(timeout 60 "$BIN/scaletrain" eval --model resnet20 --data "$T/listed" --split train --checkpoint "$T/none.h5" \
  --require-checksums 2>&1) || rc=$?
check_refusal "eval --require-checksums" "$rc" "$out" "1 shard of $T/listed/train has HDF5 metadata without checksums"
for extra in "" "--require-checksums"; do
  rc=0
  out=$("${MPI2[@]}" "$BIN/scaletrain" "${TRAIN[@]}" --data "$T/listed" --output-dir "$T/r3" --verify-data $extra 2>&1) ||
    rc=$?
  check_refusal "train --verify-data $extra" "$rc" "$out" "--verify-data: 1 damaged shard in $T/listed/train" "$file"
done
rc=0
out=$(timeout 60 "$BIN/scaletrain-data" inspect "$T/listed" --verify-data 2>&1) || rc=$?
check_refusal "inspect --verify-data" "$rc" "$out" "--verify-data: 1 damaged shard in $T/listed/train" "$file"

echo "== --verify-data refuses a shard libhdf5 could not open before any HDF5 call, on every read path"
# The shard keeps the size its manifest records, but its HDF5 signature and superblock are gone:
# handed to libhdf5 it would fail with "not an HDF5 file" (the control below). So a refusal with
# our --verify-data message and no HDF5 error text shows that the checksums were compared before
# anything opened the file: each reader (--io), staging, JPEG shards, the recommendation task,
# eval and inspect. None of these runs reaches libhdf5 on the damaged file (the sanitizer build
# runs them all).
# unopenable FILE: zeros over the 8-byte signature at offset 0, 0xff over the superblock's versions
# and sizes after it; the size stays the same.
unopenable() {
  $PY -c "
import sys
f = open(sys.argv[1], 'r+b')
f.seek(0); f.write(b'\0' * 8)
f.seek(8); f.write(b'\xff' * 16)" "$1"
}
# refused_first NAME RC OUT SPLIT_DIR FILE: refused by --verify-data naming FILE, and no HDF5 error.
refused_first() {
  local name=$1 rc=$2 out=$3 split_dir=$4 file=$5
  check_refusal "$name" "$rc" "$out" "--verify-data: 1 damaged shard in $split_dir:" "  $file: "
  ! grep -E "HDF5|H5[A-Z]|not an HDF5 file" <<<"$out" || fail "$name: an HDF5 error or warning before the refusal: $out"
}
start=$SECONDS
write_h5py "$T/sig0"
"$BIN/scaletrain-data" manifest "$T/sig0" >/dev/null
cp -r "$T/sig0" "$T/sig" && cp -r "$T/sig0" "$T/sigval"
file=$T/sig/train/shard-00000-of-00001.h5
unopenable "$file"
unopenable "$T/sigval/val/shard-00000-of-00001.h5"
rc=0
out=$(timeout 60 "$BIN/scaletrain" "${TRAIN[@]}" --data "$T/sig" --output-dir "$T/s0" 2>&1) || rc=$?
check_refusal "control: without --verify-data, libhdf5 cannot open it" "$rc" "$out" "$file: not an HDF5 file"
for io in posix mmap mpiio mpiio-collective; do
  rc=0
  out=$("${MPI2[@]}" "$BIN/scaletrain" "${TRAIN[@]}" --data "$T/sig" --output-dir "$T/s-$io" --io "$io" --verify-data 2>&1) ||
    rc=$?
  refused_first "train --io $io --verify-data" "$rc" "$out" "$T/sig/train" "$file"
done
mkdir -p "$T/stage"
rc=0
out=$("${MPI2[@]}" "$BIN/scaletrain" "${TRAIN[@]}" --data "$T/sig" --output-dir "$T/s-stage" --stage-to "$T/stage" \
  --verify-data 2>&1) || rc=$?
refused_first "train --stage-to --verify-data" "$rc" "$out" "$T/sig/train" "$file"
[ -z "$(find "$T/stage" -type f)" ] || fail "train --stage-to: staged before the refusal: $(find "$T/stage" -type f)"
echo "ok: nothing staged"
rc=0
out=$("${MPI2[@]}" "$BIN/scaletrain" "${TRAIN[@]}" --data "$T/sigval" --output-dir "$T/s-val" --io mmap --verify-data 2>&1) ||
  rc=$?
refused_first "train --verify-data, the val split damaged" "$rc" "$out" "$T/sigval/val" "$T/sigval/val/shard-00000-of-00001.h5"
rc=0
out=$(timeout 60 "$BIN/scaletrain" eval --model resnet20 --data "$T/sig" --split train --checkpoint "$T/none.h5" \
  --io mpiio --verify-data 2>&1) || rc=$?
refused_first "eval --split train --verify-data" "$rc" "$out" "$T/sig/train" "$file"
rc=0
out=$(timeout 60 "$BIN/scaletrain" eval --model resnet20 --data "$T/sigval" --checkpoint "$T/none.h5" --verify-data 2>&1) ||
  rc=$?
refused_first "eval --verify-data (val)" "$rc" "$out" "$T/sigval/val" "$T/sigval/val/shard-00000-of-00001.h5"
rc=0
out=$("${MPI2[@]}" "$BIN/scaletrain-data" inspect "$T/sig" --verify-data 2>&1) || rc=$?
refused_first "inspect --verify-data" "$rc" "$out" "$T/sig/train" "$file"
# JPEG shards (scaletrain-data convert imagenet --encoding jpeg, which writes the manifest).
$PY - "$T/jpeg-src" <<'PY'
import os, sys
from PIL import Image
for split, n in (("train", 4), ("val", 2)):
    for c, colour in enumerate(((200, 30, 40), (20, 180, 60))):
        d = os.path.join(sys.argv[1], split, f"n0000000{c}")
        os.makedirs(d)
        for i in range(n):
            Image.new("RGB", (12, 10), colour).save(os.path.join(d, f"{i}.JPEG"), quality=90)
PY
"$BIN/scaletrain-data" convert imagenet --source "$T/jpeg-src" --output "$T/jpeg" --encoding jpeg >/dev/null
[ -f "$T/jpeg/train/manifest.json" ] || "$BIN/scaletrain-data" manifest "$T/jpeg" >/dev/null
jfile=$(ls "$T"/jpeg/train/*.h5 | head -1)
unopenable "$jfile"
rc=0
out=$("${MPI2[@]}" "$BIN/scaletrain" "${TRAIN[@]}" --data "$T/jpeg" --output-dir "$T/s-jpeg" --io mmap \
  --verify-data 2>&1) || rc=$?
refused_first "train --verify-data, JPEG shards" "$rc" "$out" "$T/jpeg/train" "$jfile"
# The recommendation task (NCF).
"$BIN/scaletrain-data" synthetic --task recommendation --users 40 --items 30 --groups 2 --positives-per-user 5 \
  --eval-negatives 9 --output "$T/ncf" >/dev/null
[ -f "$T/ncf/train/manifest.json" ] || "$BIN/scaletrain-data" manifest "$T/ncf" >/dev/null
cp -r "$T/ncf" "$T/ncfval"
nfile=$(ls "$T"/ncf/train/*.h5 | head -1)
unopenable "$nfile"
rc=0
out=$("${MPI2[@]}" "$BIN/scaletrain" train --model ncf --epochs 1 --batch-size 16 --threads 1 --max-steps 1 --data "$T/ncf" \
  --output-dir "$T/s-ncf" --verify-data 2>&1) || rc=$?
refused_first "train --model ncf --verify-data" "$rc" "$out" "$T/ncf/train" "$nfile"
nval=$(ls "$T"/ncfval/val/*.h5 | head -1)
unopenable "$nval"
rc=0
out=$(timeout 60 "$BIN/scaletrain" eval --model ncf --data "$T/ncfval" --checkpoint "$T/none.h5" --verify-data 2>&1) ||
  rc=$?
refused_first "eval --model ncf --verify-data (val)" "$rc" "$out" "$T/ncfval/val" "$nval"
echo "ok: every read path refused before libhdf5 ($((SECONDS - start)) s)"

echo "== checksummed metadata: not warned about"
write_h5py "$T/latest" "('v110', 'latest')"
out=$("$BIN/scaletrain" "${TRAIN[@]}" --data "$T/latest" --output-dir "$T/r4" 2>&1) || fail "training (libver): $out"
! grep -q "without checksums" <<<"$out" || fail "warned about shards written with libver: $out"
out=$("$BIN/scaletrain-data" inspect "$T/latest") || fail "inspect (libver): $out"
! grep -q "unchecked:" <<<"$out" || fail "inspect lists shards written with libver: $out"
# --require-checksums still wants a manifest; with one, they pass without --verify-data.
"$BIN/scaletrain-data" manifest "$T/latest" >/dev/null
"$BIN/scaletrain-data" inspect "$T/latest" --require-checksums >/dev/null || fail "inspect --require-checksums (libver)"
echo "ok: h5py libver=('v110', 'latest')"
# A task written as a Python str is a variable-length string, whose value HDF5 keeps in its global
# heap without checksums even in the 1.10 format: --require-checksums wants --verify-data for it.
write_h5py "$T/heapstr" "('v110', 'latest')" str
"$BIN/scaletrain-data" manifest "$T/heapstr" >/dev/null
rc=0
out=$("${MPI2[@]}" "$BIN/scaletrain" "${TRAIN[@]}" --data "$T/heapstr" --output-dir "$T/r6" --require-checksums 2>&1) ||
  rc=$?
check_refusal "train --require-checksums, a variable-length task string" "$rc" "$out" \
  "1 shard of $T/heapstr/train keeps a string attribute as a variable-length string" \
  "$T/heapstr/train/shard-00000-of-00001.h5 ('task')" "add --verify-data" "np.bytes_"
"$BIN/scaletrain-data" inspect "$T/heapstr" --require-checksums --verify-data >/dev/null ||
  fail "inspect --require-checksums --verify-data (variable-length task)"
rc=0
out=$("${MPI2[@]}" "$BIN/scaletrain-data" inspect "$T/heapstr" --require-checksums 2>&1) || rc=$?
check_refusal "inspect --require-checksums on 2 ranks (rank 0 refuses, rank 1 agrees)" "$rc" "$out" \
  "$T/heapstr/train/shard-00000-of-00001.h5 ('task')"
echo "ok: a variable-length task string needs --verify-data under --require-checksums"
# Sizes are compared with the manifest before the string check opens a shard: a shard cut short
# gets the manifest's message, not libhdf5's.
cp -r "$T/latest" "$T/cut"
truncate -s -100 "$T/cut/val/shard-00000-of-00001.h5"
rc=0
out=$(timeout 60 "$BIN/scaletrain-data" inspect "$T/cut" --require-checksums 2>&1) || rc=$?
check_refusal "inspect --require-checksums, a shard cut short" "$rc" "$out" \
  "$T/cut/val/shard-00000-of-00001.h5 is damaged" "cut short or still being copied"
! grep -q "HDF5" <<<"$out" || fail "libhdf5 was asked first: $out"
"$BIN/scaletrain-data" synthetic --samples 64 --val-samples 32 --image-size 8,8,3 --classes 4 --shards 2 \
  --output "$T/synthetic" >/dev/null
out=$("$BIN/scaletrain" "${TRAIN[@]}" --data "$T/synthetic" --output-dir "$T/r5" --require-checksums 2>&1) ||
  fail "training on synthetic data with --require-checksums: $out"
! grep -q "without checksums" <<<"$out" || fail "warned about scaletrain-data synthetic's shards: $out"
$PY -c "
import json, sys
assert json.load(open(sys.argv[1]))['dataset']['unchecked_shards'] == {'count': 0, 'paths': []}" "$T/r5/report.json" ||
  fail "report.json of synthetic data lists unchecked shards"
echo "ok: scaletrain-data synthetic"
echo "PASS"
