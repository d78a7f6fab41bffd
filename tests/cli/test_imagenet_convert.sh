#!/usr/bin/env bash
# scaletrain-data convert imagenet end to end on a tiny tree made here with PIL (3 classes x 4
# images, val as val/*.JPEG + labels file and as val/<wnid>/): jpeg and raw encodings under
# mpirun -np 2, inspect accepts both, h5py reads the flat JPEG bytes (format 2: 'jpeg' uint8 +
# 'jpeg_offsets') back equal to the source files, one and two ranks give identical shards, raw
# pixels match the flat colours, --max-side shrinks; all --io modes give identical batches; a
# format-1 (vlen) JPEG dataset written by h5py is refused by inspect and train with the upgrade
# hint, and 'scaletrain-data upgrade' converts it (same bytes, same checksum); upgrade gives raw
# shards written with h5py's default format (superblock 0, no metadata checksums; contiguous,
# chunked + gzip) checksummed metadata with the same samples and attributes, after which inspect
# lists none unchecked and train --require-checksums runs; damaged offsets are named; a chunked 'jpeg' written by h5py reads through the fallback path;
# errors: no train/, an unreadable image, val/*.JPEG without --val-labels, bad options; a stored
# JPEG that does not decode stops reading on every rank naming file and sample (or is skipped).
# Env (set by ctest): ST_BIN (build/bin), ST_TMP (scratch).
set -euo pipefail

BIN=${ST_BIN:?}/scaletrain-data
W=${ST_TMP:?}/imagenet_convert
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
MPI2=(timeout 120 mpirun --oversubscribe -np 2)
rm -rf "$W"
mkdir -p "$W"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# expect_error NEEDLE COMMAND...: non-zero exit within 60 s, NEEDLE in the output.
expect_error() {
  local needle=$1
  shift
  local out rc=0
  out=$(timeout 60 "$@" 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || fail "exited 0, expected an error: $*"
  [ "$rc" -ne 124 ] || fail "hung: $*"
  grep -qF -- "$needle" <<<"$out" || fail "expected '$needle' in: $out"
  echo "ok: error '$needle' (exit $rc)"
}

# The tree: class c's images are flat colours (so that raw pixels are predictable) of varied
# sizes; val/ holds 3 images per layout.
$PY - "$W" <<'EOF'
import os, sys
from PIL import Image
root = sys.argv[1]
wnids = ["n01440764", "n01443537", "n01484850"]
colours = [(200, 30, 40), (20, 180, 60), (40, 60, 220)]
sizes = [(60, 40), (50, 70), (64, 48), (33, 45)]  # (w, h)
for tree in ("flat", "bydir"):
    for c, wnid in enumerate(wnids):
        d = os.path.join(root, tree, "train", wnid)
        os.makedirs(d)
        for i, (w, h) in enumerate(sizes):
            Image.new("RGB", (w, h), colours[c]).save(os.path.join(d, f"{wnid}_{i}.JPEG"), quality=95)
    lines = ["ImageId,PredictionString"]
    for k in range(3):
        c = (k + 1) % 3
        if tree == "flat":
            os.makedirs(os.path.join(root, tree, "val"), exist_ok=True)
            name = f"ILSVRC2012_val_{k + 1:08d}"
            Image.new("RGB", (48, 40), colours[c]).save(os.path.join(root, tree, "val", name + ".JPEG"), quality=95)
            lines.append(f"{name},{wnids[c]} 1 2 3 4")
        else:
            d = os.path.join(root, tree, "val", wnids[c])
            os.makedirs(d, exist_ok=True)
            Image.new("RGB", (48, 40), colours[c]).save(os.path.join(d, f"v{k}.JPEG"), quality=95)
    if tree == "flat":
        open(os.path.join(root, "val_labels.csv"), "w").write("\n".join(lines) + "\n")
# A large image for --max-side.
os.makedirs(os.path.join(root, "big", "train", "n0"))
os.makedirs(os.path.join(root, "big", "val", "n0"))
Image.new("RGB", (200, 100), (90, 90, 90)).save(os.path.join(root, "big", "train", "n0", "a.JPEG"), quality=90)
Image.new("RGB", (20, 10), (90, 90, 90)).save(os.path.join(root, "big", "val", "n0", "b.JPEG"), quality=90)
EOF

# jpeg encoding, 2 ranks, 3 shards; and 1 rank for comparison.
"${MPI2[@]}" "$BIN" convert imagenet --source "$W/flat" --output "$W/jpeg2" --encoding jpeg --shards 3 \
  --val-labels "$W/val_labels.csv" --chunk-samples 2 >"$W/out.txt"
grep -qF "split train: 12 samples in 3 shards, encoding jpeg, 3 classes" "$W/out.txt" || fail "summary: $(cat "$W/out.txt")"
timeout 120 "$BIN" convert imagenet --source "$W/flat" --output "$W/jpeg1" --encoding jpeg --shards 3 \
  --val-labels "$W/val_labels.csv" --chunk-samples 2 >/dev/null
"$BIN" inspect "$W/jpeg2" >"$W/inspect.txt" || fail "inspect rejected the jpeg dataset"
grep -qF "12 samples in 3 shards" "$W/inspect.txt" || fail "inspect: $(cat "$W/inspect.txt")"
echo "ok: jpeg convert under mpirun -np 2, inspect"

# h5py reads the flat bytes: sample i is jpeg[offsets[i]:offsets[i+1]], equal to the source
# files in sorted order, labels = class index; one and two ranks wrote the same contents.
$PY - "$W" <<'EOF'
import glob, os, sys
import h5py, numpy as np
root = sys.argv[1]
def load(d, split):
    data, labels = [], []
    for p in sorted(glob.glob(os.path.join(d, split, "*.h5"))):
        with h5py.File(p, "r") as f:
            assert f.attrs["scaletrain_format"] == 2
            assert f.attrs["encoding"] in ("jpeg", b"jpeg"), f.attrs["encoding"]
            assert "checksum" in f.attrs, p
            assert list(f.attrs["mean"]) == [0.485, 0.456, 0.406]
            assert list(f.attrs["std"]) == [0.229, 0.224, 0.225]
            j, o = f["jpeg"], f["jpeg_offsets"]
            assert j.dtype == np.uint8 and j.ndim == 1 and j.chunks is None, (j.dtype, j.shape, j.chunks)
            assert o.dtype == np.int64 and o.shape == (f["labels"].shape[0] + 1,), (o.dtype, o.shape)
            o = o[:]
            assert o[0] == 0 and o[-1] == j.shape[0] and (np.diff(o) > 0).all(), o
            b = j[:].tobytes()
            data += [b[o[i]:o[i + 1]] for i in range(len(o) - 1)]
            labels += list(f["labels"][:])
    return data, labels
train, tl = load(os.path.join(root, "jpeg2"), "train")
files = sorted(glob.glob(os.path.join(root, "flat", "train", "*", "*.JPEG")))
assert len(train) == 12 and train == [open(p, "rb").read() for p in files], "train bytes differ from the files"
assert tl == [i // 4 for i in range(12)], tl
val, vl = load(os.path.join(root, "jpeg2"), "val")
vfiles = sorted(glob.glob(os.path.join(root, "flat", "val", "*.JPEG")))
assert val == [open(p, "rb").read() for p in vfiles] and vl == [1, 2, 0], vl
for split in ("train", "val"):
    assert load(os.path.join(root, "jpeg1"), split) == load(os.path.join(root, "jpeg2"), split), split
print("ok: h5py reads the flat bytes back, equal to the files; 1 and 2 ranks agree")
EOF

# raw encoding at 16x16 (val/<wnid>/ layout): flat colours come back within JPEG tolerance.
"${MPI2[@]}" "$BIN" convert imagenet --source "$W/bydir" --output "$W/raw" --encoding raw --image-size 16,16 \
  --shards 2 >/dev/null
"$BIN" inspect "$W/raw" | grep -qF "images 16x16x3" || fail "inspect raw: $("$BIN" inspect "$W/raw" 2>&1)"
$PY - "$W" <<'EOF'
import glob, os, sys
import h5py, numpy as np
root = sys.argv[1]
colours = np.array([(200, 30, 40), (20, 180, 60), (40, 60, 220)])
for split, n in (("train", 12), ("val", 3)):
    imgs, labels = [], []
    for p in sorted(glob.glob(os.path.join(root, "raw", split, "*.h5"))):
        with h5py.File(p, "r") as f:
            imgs.append(f["images"][:]); labels.append(f["labels"][:])
    imgs, labels = np.concatenate(imgs), np.concatenate(labels)
    assert imgs.shape == (n, 16, 16, 3), imgs.shape
    err = np.abs(imgs.astype(int) - colours[labels][:, None, None, :]).max()
    assert err <= 6, err
print("ok: raw convert (val by directory), pixels = the source colours")
EOF

# --max-side: the 200x100 image is re-encoded to 32x16; the small one is kept byte for byte.
timeout 60 "$BIN" convert imagenet --source "$W/big" --output "$W/big_out" --encoding jpeg --max-side 32 >/dev/null
$PY - "$W" <<'EOF'
import io, sys, h5py
from PIL import Image
root = sys.argv[1]
sample0 = lambda f: f["jpeg"][f["jpeg_offsets"][0]:f["jpeg_offsets"][1]].tobytes()
with h5py.File(f"{root}/big_out/train/shard-00000-of-00001.h5", "r") as f:
    im = Image.open(io.BytesIO(sample0(f)))
    assert im.size == (32, 16), im.size
with h5py.File(f"{root}/big_out/val/shard-00000-of-00001.h5", "r") as f:
    assert sample0(f) == open(f"{root}/big/val/n0/b.JPEG", "rb").read()
print("ok: --max-side")
EOF

# CMYK (as PIL writes it, Adobe-inverted) and grayscale JPEGs, which ImageNet has, decode to RGB.
mkdir -p "$W/cmyk/train/n0" "$W/cmyk/val/n0"
$PY -c "
from PIL import Image
Image.new('RGB', (40, 30), (200, 100, 50)).convert('CMYK').save('$W/cmyk/train/n0/a.JPEG', quality=95)
Image.new('L', (40, 30), 77).save('$W/cmyk/val/n0/g.JPEG', quality=95)"
timeout 60 "$BIN" convert imagenet --source "$W/cmyk" --output "$W/cmyk_out" --encoding raw --image-size 8,8 >/dev/null
$PY - "$W/cmyk_out" <<'EOF'
import sys, h5py, numpy as np
with h5py.File(f"{sys.argv[1]}/train/shard-00000-of-00001.h5", "r") as f:
    assert np.abs(f["images"][0].astype(int) - [200, 100, 50]).max() <= 3, f["images"][0, 4, 4]
with h5py.File(f"{sys.argv[1]}/val/shard-00000-of-00001.h5", "r") as f:
    assert np.abs(f["images"][0].astype(int) - 77).max() <= 2, f["images"][0, 4, 4]
print("ok: CMYK and grayscale JPEGs")
EOF

# Errors.
mkdir -p "$W/notrain/val"
expect_error "notrain/train: no such directory" "${MPI2[@]}" "$BIN" convert imagenet --source "$W/notrain" \
  --output "$W/e1" --encoding jpeg
cp -r "$W/bydir" "$W/bad"
echo "this is not a jpeg" >"$W/bad/train/n01443537/n01443537_9.JPEG"
expect_error "n01443537_9.JPEG: JPEG does not decode" "${MPI2[@]}" "$BIN" convert imagenet --source "$W/bad" \
  --output "$W/e2" --encoding jpeg --shards 2
expect_error "n01443537_9.JPEG: JPEG does not decode" "${MPI2[@]}" "$BIN" convert imagenet --source "$W/bad" \
  --output "$W/e3" --encoding raw --image-size 8,8
expect_error "--val-labels" "$BIN" convert imagenet --source "$W/flat" --output "$W/e4" --encoding jpeg
expect_error "--encoding must be raw or jpeg" "$BIN" convert imagenet --source "$W/flat" --output "$W/e5" --encoding png
expect_error "already holds shards" "$BIN" convert imagenet --source "$W/bydir" --output "$W/raw" --encoding jpeg

# The evaluation transform against torchvision's Resize(256) + CenterCrop(224) + Normalize on a
# 500x375 image (smooth pattern plus an off-centre dark square): close on average (torchvision
# antialiases, we decode at a DCT scale and resample bilinearly) and aligned (around the square,
# a one-pixel shift in x or y compares clearly worse).
mkdir -p "$W/tv/train/n0" "$W/tv/val/n0"
$PY - "$W/tv" <<'EOF'
import sys, numpy as np
from PIL import Image
h, w = 375, 500
y, x = np.mgrid[0:h, 0:w].astype(float)
img = np.stack([128 + 100 * np.sin(x / 40 + y / 70), 128 + 100 * np.cos(x / 55 - y / 35),
                100 + 80 * np.sin((x + y) / 90)], -1)
img[150:220, 150:200] = 20
im = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
im.save(f"{sys.argv[1]}/train/n0/a.JPEG", quality=95)
im.save(f"{sys.argv[1]}/val/n0/b.JPEG", quality=95)
EOF
timeout 60 "$BIN" convert imagenet --source "$W/tv" --output "$W/tv_out" --encoding jpeg >/dev/null
timeout 60 "$BIN" bench "$W/tv_out" --split val --no-shuffle --no-drop-last --batch-size 1 --image-size 224,224 \
  --dump "$W/tv_dump.h5" >/dev/null
$PY - "$W" <<'EOF'
import sys, h5py, numpy as np
from PIL import Image
import torchvision.transforms as T
root = sys.argv[1]
ours = h5py.File(f"{root}/tv_dump.h5", "r")["images"][0]
t = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
               T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
ref = t(Image.open(f"{root}/tv/val/n0/b.JPEG").convert("RGB")).permute(1, 2, 0).numpy()
assert ours.shape == ref.shape == (224, 224, 3), (ours.shape, ref.shape)
d = np.abs(ours - ref).mean()
assert d < 0.025, d
# Around the dark square (rows 150-220, columns 150-200 of the original: 86-134, 44-78 here).
win = lambda a, dy, dx: a[80 + dy:140 + dy, 38 + dx:84 + dx]
aligned = np.abs(win(ours, 0, 0) - win(ref, 0, 0)).mean()
shifted = min(np.abs(win(ours, 0, 0) - win(ref, dy, dx)).mean() for dy, dx in ((0, 1), (0, -1), (1, 0), (-1, 0)))
assert aligned < 0.8 * shifted, (aligned, shifted)
print(f"ok: eval transform vs torchvision: mean |diff| {d:.4f}; at the square's edges {aligned:.3f}, "
      f"one pixel off {shifted:.3f} or more")
EOF

# A stored JPEG that does not decode: reading the split stops on every rank (no hang) with the
# shard file, the sample and libjpeg-turbo's message; --skip-bad-samples reads past it.
mkdir -p "$W/badj"
cp -r "$W/jpeg2/val" "$W/badj/"
$PY - "$W/badj/val/shard-00000-of-00003.h5" <<'EOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    a, b = f["jpeg_offsets"][0:2]
    f["jpeg"][a:b] = np.frombuffer((b"garbage bytes, not a jpeg " * 1000)[:b - a], np.uint8)
    del f.attrs["checksum"]
EOF
"$BIN" manifest "$W/badj" >/dev/null  # edited on purpose: the manifest describes the edited shard
expect_error "shard-00000-of-00003.h5: sample 0" "${MPI2[@]}" "$BIN" bench "$W/badj" --split val --no-shuffle \
  --no-drop-last --batch-size 1 --image-size 16,16
expect_error "JPEG does not decode: Not a JPEG file" "${MPI2[@]}" "$BIN" bench "$W/badj" --split val --no-shuffle \
  --no-drop-last --batch-size 1 --image-size 16,16
timeout 60 "$BIN" bench "$W/badj" --split val --batch-size 2 --image-size 16,16 --skip-bad-samples >/dev/null ||
  fail "--skip-bad-samples did not read past the bad JPEG"
echo "ok: a bad stored JPEG"

# expect_exit1 NEEDLE COMMAND...: exit status 1 (an error about the data, not a crash or a hang).
expect_exit1() {
  local needle=$1
  shift
  local out rc=0
  out=$(timeout 60 "$@" 2>&1) || rc=$?
  [ "$rc" -eq 1 ] || fail "exit $rc, expected 1: $* -> $out"
  grep -qF -- "$needle" <<<"$out" || fail "expected '$needle' in: $out"
  echo "ok: exit 1 with '$needle'"
}

# Every --io mode gives the same batches (with augmentation, under mpirun -np 2) on the flat JPEG
# dataset; mpiio-collective reads JPEG byte ranges collectively.
for io in posix mmap mpiio mpiio-collective; do
  "${MPI2[@]}" "$BIN" bench "$W/jpeg2" --io $io --batch-size 3 --image-size 16,16 --augment --dump-batches 2 \
    --dump "$W/io_$io.h5" >"$W/io_$io.txt" 2>&1 || fail "bench --io $io: $(cat "$W/io_$io.txt")"
done
grep -qF "mpiio-collective reader" "$W/io_mpiio-collective.txt" || fail "not collective: $(cat "$W/io_mpiio-collective.txt")"
$PY - "$W" <<'EOF'
import sys, h5py, numpy as np
root = sys.argv[1]
ref = h5py.File(f"{root}/io_posix.h5", "r")
assert ref["images"].shape == (6, 16, 16, 3), ref["images"].shape
for io in ("mmap", "mpiio", "mpiio-collective"):
    with h5py.File(f"{root}/io_{io}.h5", "r") as f:
        for k in ("images", "labels", "ids"):
            assert np.array_equal(f[k][:], ref[k][:]), (io, k)
print("ok: posix, mmap, mpiio and mpiio-collective give identical JPEG batches")
EOF

# A format-1 dataset written with h5py (vlen 'jpeg' in the global heap, as the version 1 docs
# said), plus a format-1 raw split; its checksum computed here with zlib per the definition.
$PY - "$W" <<'EOF'
import glob, os, sys, zlib
import h5py, numpy as np
root = sys.argv[1]
def crc(labels, samples):
    c = zlib.crc32(np.asarray(labels, "<i4").tobytes())
    for b in samples:
        c = zlib.crc32(len(b).to_bytes(8, "little"), c)
        c = zlib.crc32(b, c)
    return "crc32:%08x" % c
def write_v1(path, files, labels):
    with h5py.File(path, "w") as f:
        f.attrs.update(scaletrain_format=1, task="image_classification", num_classes=3, encoding="jpeg",
                       mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
        d = f.create_dataset("jpeg", (len(files),), dtype=h5py.vlen_dtype(np.uint8), chunks=(min(4, len(files)),))
        for i, p in enumerate(files):
            d[i] = np.frombuffer(open(p, "rb").read(), np.uint8)
        f.create_dataset("labels", data=np.asarray(labels, "int32"))
        f.attrs["checksum"] = crc(labels, [open(p, "rb").read() for p in files])
train = sorted(glob.glob(os.path.join(root, "flat", "train", "*", "*.JPEG")))
val = sorted(glob.glob(os.path.join(root, "flat", "val", "*.JPEG")))
for d in ("train", "val", "extra"):
    os.makedirs(os.path.join(root, "v1", d))
write_v1(f"{root}/v1/train/shard-00000-of-00002.h5", train[:5], [i // 4 for i in range(5)])
write_v1(f"{root}/v1/train/shard-00001-of-00002.h5", train[5:], [i // 4 for i in range(5, 12)])
write_v1(f"{root}/v1/val/shard-00000-of-00001.h5", val, [1, 2, 0])
with h5py.File(f"{root}/v1/extra/shard-00000-of-00001.h5", "w") as f:
    images = np.arange(4 * 5 * 6 * 3, dtype=np.uint8).reshape(4, 5, 6, 3)
    f.attrs.update(scaletrain_format=1, task="image_classification", num_classes=3, mean=[0.5] * 3, std=[0.25] * 3)
    f.create_dataset("images", data=images, chunks=(2, 5, 6, 3))
    f.create_dataset("labels", data=np.array([0, 1, 2, 0], "int32"))
EOF
V1SHARD="$W/v1/train/shard-00000-of-00002.h5"
expect_exit1 "$V1SHARD: a JPEG shard of dataset format 1" "$BIN" inspect "$W/v1"
expect_exit1 "global heap, which one damaged byte can make the HDF5 library crash or hang" "$BIN" inspect "$W/v1"
expect_exit1 "scaletrain-data upgrade $W/v1 --output NEW_DIR" "$BIN" inspect "$W/v1"
expect_exit1 "scaletrain-data upgrade $W/v1 --output NEW_DIR" "$ST_BIN/scaletrain" train --model resnet20 \
  --data "$W/v1" --output-dir "$W/v1_run" --image-size 16,16
"$BIN" upgrade --help | grep -qF "upgrade SRC --output DST" || fail "upgrade --help"

# upgrade: format 2, same shard names, bytes, labels, attributes and checksum value.
"${MPI2[@]}" "$BIN" upgrade "$W/v1" --output "$W/v2" >"$W/upgrade.txt" || fail "upgrade: $(cat "$W/upgrade.txt")"
grep -qF "split train: 12 samples in 2 shards, encoding jpeg" "$W/upgrade.txt" || fail "upgrade: $(cat "$W/upgrade.txt")"
"$BIN" inspect "$W/v2" >/dev/null || fail "inspect rejected the upgraded dataset"
$PY - "$W" <<'EOF'
import glob, os, sys
import h5py, numpy as np
root = sys.argv[1]
old = sorted(glob.glob(f"{root}/v1/*/*.h5"))
new = sorted(glob.glob(f"{root}/v2/*/*.h5"))
assert [os.path.relpath(p, f"{root}/v1") for p in old] == [os.path.relpath(p, f"{root}/v2") for p in new], new
for a, b in zip(old, new):
    with h5py.File(a, "r") as f, h5py.File(b, "r") as g:
        assert g.attrs["scaletrain_format"] == 2, b
        text = lambda v: v.decode() if isinstance(v, bytes) else v  # fixed-length strings come back as bytes
        for k in ("num_classes", "mean", "std"):
            assert np.array_equal(np.asarray(f.attrs[k]), np.asarray(g.attrs[k])), (b, k, f.attrs[k], g.attrs[k])
        assert text(f.attrs["task"]) == text(g.attrs["task"]), b
        assert np.array_equal(f["labels"][:], g["labels"][:]), b
        if "jpeg" in f:
            assert text(f.attrs["checksum"]) == text(g.attrs["checksum"]), (b, f.attrs["checksum"], g.attrs["checksum"])
            o = g["jpeg_offsets"][:]
            flat = g["jpeg"][:].tobytes()
            assert [flat[o[i]:o[i + 1]] for i in range(len(o) - 1)] == [bytes(x) for x in f["jpeg"][:]], b
        else:
            assert "checksum" in g.attrs, b
            assert np.array_equal(f["images"][:], g["images"][:]) and g["images"].chunks == (2, 5, 6, 3), b
print("ok: upgrade keeps names, samples, attributes and the checksum value; raw shards rewritten, same chunks")
EOF
expect_exit1 "already holds shards" "$BIN" upgrade "$W/v1" --output "$W/v2"
"$BIN" upgrade "$W/v1" --output "$W/v2" --overwrite >/dev/null || fail "upgrade --overwrite"

# upgrade gives raw shards written with h5py's default (oldest) file format, whose HDF5 metadata
# has no checksums, checksummed metadata: train/ holds a contiguous 'images' and a chunked +
# gzip-compressed one (big-endian labels; float32 mean/std), val/ one chunked across a sample.
# Same samples bit for bit, same attributes, chunks along N kept (else the default), superblock
# 0 before and >= 2 after (byte 8, after the signature), and no longer 'unchecked' for inspect.
$PY - "$W/rawold" <<'EOF'
import os, sys
import h5py, numpy as np
root = sys.argv[1]
rng = np.random.default_rng(7)
def write(path, n, chunks, stats="float64", labels="int32", **kw):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    images = rng.integers(0, 256, size=(n, 8, 8, 3), dtype=np.uint8)
    with h5py.File(path, "w") as f:  # h5py's default libver: superblock 0, no checksums
        f.attrs.update(scaletrain_format=2, task="image_classification", num_classes=5)
        f.attrs["mean"] = np.asarray([0.51, 0.49, 0.5], stats)  # the same in every shard of a split
        f.attrs["std"] = np.asarray([0.29, 0.28, 0.3], stats)
        f.create_dataset("images", data=images, chunks=chunks, **kw)
        f.create_dataset("labels", data=rng.integers(0, 5, size=n).astype(labels))
write(f"{root}/train/shard-00000-of-00002.h5", 40, None, "float32")
write(f"{root}/train/shard-00001-of-00002.h5", 37, (5, 8, 8, 3), "float32", ">i4", compression="gzip")
write(f"{root}/val/shard-00000-of-00001.h5", 12, (4, 4, 8, 3))
EOF
"${MPI2[@]}" "$BIN" upgrade "$W/rawold" --output "$W/rawnew" >"$W/rawupgrade.txt" || fail "upgrade raw: $(cat "$W/rawupgrade.txt")"
grep -qF "split train: 77 samples in 2 shards, encoding raw" "$W/rawupgrade.txt" || fail "upgrade raw: $(cat "$W/rawupgrade.txt")"
PYTHONPATH="$(dirname "$0")" $PY - "$W/rawold" "$W/rawnew" <<'EOF'
import glob, os, sys
import h5py, numpy as np
old, new = sys.argv[1:]
from hdf5_superblock import superblock  # tests/cli/hdf5_superblock.py
names = sorted(os.path.relpath(p, old) for p in glob.glob(f"{old}/*/*.h5"))
assert names == sorted(os.path.relpath(p, new) for p in glob.glob(f"{new}/*/*.h5")) and len(names) == 3, names
want_chunks = {"train/shard-00000-of-00002.h5": (40, 8, 8, 3),  # contiguous: the default chunk, capped at N
               "train/shard-00001-of-00002.h5": (5, 8, 8, 3),   # chunked along N: kept
               "val/shard-00000-of-00001.h5": (12, 8, 8, 3)}    # chunked across a sample: the default
text = lambda v: v.decode() if isinstance(v, bytes) else v
for name in names:
    a, b = f"{old}/{name}", f"{new}/{name}"
    assert superblock(a) == 0, (a, superblock(a))
    assert superblock(b) >= 2, (b, superblock(b))
    with h5py.File(a, "r") as f, h5py.File(b, "r") as g:
        assert sorted(g) == ["images", "labels"], (b, sorted(g))
        assert np.array_equal(f["images"][()], g["images"][()]) and g["images"].dtype == np.uint8, b
        assert np.array_equal(f["labels"][()], g["labels"][()]) and g["labels"].dtype == np.dtype("<i4"), b
        for k in ("num_classes", "mean", "std"):
            assert np.array_equal(np.asarray(f.attrs[k]), np.asarray(g.attrs[k])), (b, k, f.attrs[k], g.attrs[k])
        assert text(g.attrs["task"]) == "image_classification" and g.attrs["scaletrain_format"] == 2, b
        assert "checksum" in g.attrs, b
        assert g["images"].chunks == want_chunks[name] and g["images"].compression is None, (b, g["images"].chunks)
print("ok: upgrade of h5py-default raw shards: superblock 0 -> >= 2, samples, labels and attributes equal")
EOF
grep -q "unchecked:" <("$BIN" inspect "$W/rawold") || fail "inspect lists no unchecked shards in the h5py-default dataset"
out=$("$BIN" inspect "$W/rawnew") || fail "inspect of the upgraded raw dataset: $out"
! grep -q "unchecked:" <<<"$out" || fail "upgraded shards still unchecked: $out"
[ -f "$W/rawnew/train/manifest.json" ] && [ -f "$W/rawnew/val/manifest.json" ] || fail "upgrade wrote no manifests"
"$BIN" verify "$W/rawnew" >/dev/null || fail "verify of the upgraded raw dataset"
timeout 120 "$ST_BIN/scaletrain" train --model resnet20 --data "$W/rawnew" --batch-size 8 --max-steps 2 --threads 1 \
  --require-checksums --output-dir "$W/train_rawnew" --overwrite >"$W/train_rawnew.txt" 2>&1 ||
  fail "training on the upgraded raw shards with --require-checksums: $(tail -n 5 "$W/train_rawnew.txt")"
! grep -q "without checksums" "$W/train_rawnew.txt" || fail "training warned about the upgraded shards"
expect_error "--require-checksums" timeout 120 "$ST_BIN/scaletrain" train --model resnet20 --data "$W/rawold" \
  --batch-size 8 --max-steps 2 --threads 1 --require-checksums --output-dir "$W/train_rawold" --overwrite
echo "ok: upgraded raw shards: none unchecked, manifests verify, train --require-checksums runs (refused before)"

# Damaged offsets: named with the file (and the sample).
for kind in order last; do
  rm -rf "$W/dmg_$kind" && mkdir -p "$W/dmg_$kind" && cp -r "$W/jpeg2/train" "$W/jpeg2/val" "$W/dmg_$kind/"
  $PY - "$W/dmg_$kind/train/shard-00001-of-00003.h5" $kind <<'EOF'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    o = f["jpeg_offsets"]
    if sys.argv[2] == "order":
        o[2] = o[1]
    else:
        o[-1] = o[-1] + 5
EOF
done
expect_exit1 "dmg_order/train/shard-00001-of-00003.h5: 'jpeg_offsets' is not increasing at sample 1" \
  "$BIN" inspect "$W/dmg_order"
expect_exit1 "dmg_last/train/shard-00001-of-00003.h5: 'jpeg_offsets' ends at" "$BIN" inspect "$W/dmg_last"

# A 'jpeg' dataset chunked (h5py, shard 0), gzip-compressed (shard 1) or contiguous (shard 2):
# posix and the MPI-IO modes read it (pread or MPI-IO per chunk, HDF5 for the compressed one)
# and give the batches of the original; mmap refuses the compressed shard, naming it.
mkdir -p "$W/chunked"
cp -r "$W/jpeg2/val" "$W/chunked/"
$PY - "$W" <<'EOF'
import glob, os, sys, h5py
root = sys.argv[1]
os.makedirs(f"{root}/chunked/train")
for i, p in enumerate(sorted(glob.glob(f"{root}/jpeg2/train/*.h5"))):
    with h5py.File(p, "r") as f, h5py.File(f"{root}/chunked/train/" + os.path.basename(p), "w") as g:
        for k, v in f.attrs.items():
            g.attrs[k] = v
        opts = [dict(chunks=(1000,)), dict(chunks=(777,), compression="gzip"), {}][i]
        g.create_dataset("jpeg", data=f["jpeg"][:], **opts)
        g.create_dataset("jpeg_offsets", data=f["jpeg_offsets"][:])
        g.create_dataset("labels", data=f["labels"][:])
EOF
for io in posix mpiio mpiio-collective; do
  "${MPI2[@]}" "$BIN" bench "$W/chunked" --io $io --batch-size 3 --image-size 16,16 --augment --dump-batches 2 \
    --dump "$W/chunked_$io.h5" >"$W/chunked_$io.txt" 2>&1 || fail "chunked --io $io: $(cat "$W/chunked_$io.txt")"
done
$PY - "$W" <<'EOF'
import sys, h5py, numpy as np
root = sys.argv[1]
ref = h5py.File(f"{root}/io_posix.h5", "r")
for io in ("posix", "mpiio", "mpiio-collective"):
    with h5py.File(f"{root}/chunked_{io}.h5", "r") as f:
        for k in ("images", "labels", "ids"):
            assert np.array_equal(f[k][:], ref[k][:]), (io, k)
print("ok: chunked and compressed 'jpeg' datasets read like the contiguous one")
EOF
expect_error "chunked/train/shard-00001-of-00003.h5: --io mmap needs the 'jpeg' bytes uncompressed" \
  "$BIN" bench "$W/chunked" --io mmap --batch-size 3 --image-size 16,16
# Training on JPEG shards: report.json's image_shape is the model's input (--image-size, or the
# model's default), not the shards' (JPEG shards hold images of every size).
for size in 16,16 default; do
  opts=(--image-size "$size")
  [ "$size" = default ] && opts=() && size=32,32  # resnet20's input
  timeout 120 "$ST_BIN/scaletrain" train --model resnet20 --data "$W/jpeg2" --batch-size 4 --max-steps 2 --threads 1 \
    "${opts[@]}" --output-dir "$W/train_jpeg" --overwrite >"$W/train_jpeg.txt" 2>&1 ||
    fail "training on JPEG shards: $(tail -n 5 "$W/train_jpeg.txt")"
  $PY -c "
import json, sys
d = json.load(open('$W/train_jpeg/report.json'))['dataset']
assert d['image_shape'] == [${size%,*}, ${size#*,}, 3] and d['task'] == 'image_classification', d
print('ok: image_shape', d['image_shape'], 'for JPEG shards')"
done
echo "PASS: imagenet convert"
