#!/usr/bin/env bash
# make_corpus.sh BIN OUT: the fuzz targets' seed corpora, made by the project's own tools
# (never checked in), deterministically, so that a regression recipe (tests/fuzz/regressions.txt:
# a corpus file name, offsets and bytes) damages the same bytes of the same layout every time:
#   OUT/shard/       raw shards of `scaletrain-data synthetic`, a JPEG shard of
#                    `scaletrain-data convert imagenet --encoding jpeg` over tiny PIL JPEGs, and
#                    shards written with h5py as docs/dataset-format.md tells users to: h5py-*.h5
#                    (raw contiguous, raw chunked and gzip-compressed, JPEG, recommendation
#                    training and evaluation, in h5py's default file format, whose metadata has no
#                    checksums, with `task` a str as users wrote it before the docs said np.bytes_;
#                    and the raw example as the docs write it now: libver=("v110", "latest") and a
#                    fixed-length `task`)
#   OUT/jpeg/        small JPEGs made with PIL (baseline, progressive, grayscale, 4:4:4, CMYK,
#                    restart markers) and one taken from that JPEG shard's source tree
#   OUT/checkpoint/  the checkpoint of a 4-step `scaletrain train` run of resnet20 on 8x8 data
#   OUT/ini/         inputs/*.ini
# The files keep fixed names. Runs the tools without mpirun (one rank, MPI singleton).
set -euo pipefail
BIN=${1:?usage: make_corpus.sh BIN OUT}
OUT=${2:?usage: make_corpus.sh BIN OUT}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$OUT/work
rm -rf "$OUT"
mkdir -p "$W" "$OUT/shard" "$OUT/jpeg" "$OUT/checkpoint" "$OUT/ini"

# Raw shards: 12 training samples of 8x8x3 in 2 shards (chunks of 256 samples: one chunk each).
"$BIN/scaletrain-data" synthetic --task image_classification --samples 12 --val-samples 8 --image-size 8,8,3 \
  --classes 4 --shards 2 --seed 7 --output "$W/raw" >/dev/null
cp "$W/raw/train/shard-00000-of-00002.h5" "$OUT/shard/raw-train-0.h5"
cp "$W/raw/val/shard-00000-of-00002.h5" "$OUT/shard/raw-val-0.h5"

# JPEGs with PIL: an ImageNet-style tree (2 classes x 2 images) for the converter, and the
# decoder's corpus with the JPEG variants libjpeg-turbo handles differently.
$PY - "$W" "$OUT/jpeg" <<'PYEOF'
import os, sys
from PIL import Image
work, jpeg = sys.argv[1], sys.argv[2]
def picture(w, h, mode="RGB"):
    im = Image.new("RGB", (w, h))
    im.putdata([((x * 37 + y * 11) % 256, (x * 5 + y * 29) % 256, (x * y) % 256) for y in range(h) for x in range(w)])
    return im.convert(mode)
for c, wnid in enumerate(["n01440764", "n01443537"]):
    d = os.path.join(work, "tree", "train", wnid)
    os.makedirs(d)
    for i, (w, h) in enumerate([(24, 20), (18, 30)]):
        picture(w + c, h).save(os.path.join(d, f"{wnid}_{i}.JPEG"), quality=90)
    v = os.path.join(work, "tree", "val", wnid)
    os.makedirs(v)
    picture(20, 20 + c).save(os.path.join(v, f"val_{c}.JPEG"), quality=90)
picture(40, 30).save(os.path.join(jpeg, "baseline-40x30.jpg"), quality=85)
picture(64, 48).save(os.path.join(jpeg, "progressive-64x48.jpg"), quality=75, progressive=True)
picture(33, 17, "L").save(os.path.join(jpeg, "gray-33x17.jpg"), quality=90)
picture(24, 24).save(os.path.join(jpeg, "444-24x24.jpg"), quality=95, subsampling=0)
picture(16, 16, "CMYK").save(os.path.join(jpeg, "cmyk-16x16.jpg"), quality=90)
picture(48, 32).save(os.path.join(jpeg, "optimized-48x32.jpg"), quality=50, optimize=True)
PYEOF
"$BIN/scaletrain-data" convert imagenet --source "$W/tree" --output "$W/jpegdata" --encoding jpeg --shards 1 >/dev/null
cp "$W/jpegdata/train/"*.h5 "$OUT/shard/jpeg-train.h5"
cp "$W/tree/train/n01440764/n01440764_0.JPEG" "$OUT/jpeg/tree-24x20.jpg"

# Shards as users write them with h5py (docs/dataset-format.md's examples), small so that most
# mutations land in the HDF5 metadata. Deterministic data; h5py's own layout choices.
$PY - "$W/tree/train" "$OUT/shard" <<'PYEOF'
import os, sys
import h5py, numpy as np
tree, out = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(11)
images = rng.integers(0, 256, size=(12, 8, 8, 3), dtype=np.uint8)
labels = rng.integers(0, 4, size=12).astype("int32")
def create(path, libver):
    if not libver:
        return h5py.File(path, "w")
    # h5py.File(path, "w", libver=libver), less the root group's timestamps, which the 1.10 format
    # keeps (h5py leaves them out of datasets): the seed is then the same bytes every time.
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(*[{"v110": h5py.h5f.LIBVER_V110, "latest": h5py.h5f.LIBVER_LATEST}[v] for v in libver])
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_obj_track_times(False)
    return h5py.File(h5py.h5f.create(path.encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl))
def raw(name, libver=None, **layout):
    with create(os.path.join(out, name), libver) as f:
        f.attrs["scaletrain_format"] = 2
        # The docs' example (libver) writes a fixed-length task; files written before it, a str.
        f.attrs["task"] = np.bytes_("image_classification") if libver else "image_classification"
        f.attrs["num_classes"] = 4
        f.attrs["mean"] = (images / 255.0).mean(axis=(0, 1, 2))
        f.attrs["std"] = (images / 255.0).std(axis=(0, 1, 2))
        f.create_dataset("images", data=images, **layout)
        f.create_dataset("labels", data=labels)
raw("h5py-default-raw.h5")
raw("h5py-default-gzip-raw.h5", chunks=(4, 8, 8, 3), compression="gzip", shuffle=True)
raw("h5py-latest-raw.h5", libver=("v110", "latest"), chunks=(4, 8, 8, 3))
files = sorted(os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs)
blobs = [open(p, "rb").read() for p in files]
offsets = np.concatenate([[0], np.cumsum([len(b) for b in blobs])]).astype("int64")
with h5py.File(os.path.join(out, "h5py-default-jpeg.h5"), "w") as f:
    f.attrs.update(scaletrain_format=2, task="image_classification", num_classes=2, encoding="jpeg",
                   mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    f.create_dataset("jpeg", data=np.frombuffer(b"".join(blobs), np.uint8))
    f.create_dataset("jpeg_offsets", data=offsets)
    f.create_dataset("labels", data=np.asarray([i // 2 for i in range(len(blobs))], "int32"))
users, items = 6, 10
with h5py.File(os.path.join(out, "h5py-default-rec-train.h5"), "w") as f:
    f.attrs.update(scaletrain_format=2, task=np.bytes_("recommendation"), num_users=users, num_items=items)
    f.create_dataset("user", data=np.repeat(np.arange(users), 3).astype("int32"))
    f.create_dataset("item", data=np.asarray([(u * 3 + k) % items for u in range(users) for k in range(3)], "int32"))
with h5py.File(os.path.join(out, "h5py-default-rec-val.h5"), "w") as f:
    f.attrs.update(scaletrain_format=2, task=np.bytes_("recommendation"), num_users=users, num_items=items)
    f.create_dataset("user", data=np.arange(users, dtype="int32"))
    f.create_dataset("item", data=np.asarray([(u * 3 + 3) % items for u in range(users)], "int32"))
    f.create_dataset("negatives", data=np.asarray([[(u * 3 + 4 + k) % items for k in range(3)] for u in range(users)],
                                                  "int32"))
PYEOF

# A checkpoint: resnet20, 4 steps of 4 samples on 16 synthetic 8x8x3 images of 4 classes (the
# shape fuzz_checkpoint restores into).
"$BIN/scaletrain-data" synthetic --task image_classification --samples 16 --val-samples 8 --image-size 8,8,3 \
  --classes 4 --shards 1 --seed 3 --output "$W/ckdata" >/dev/null
"$BIN/scaletrain" train --model resnet20 --data "$W/ckdata" --output-dir "$W/run" --epochs 1 --batch-size 4 \
  --threads 1 --data-threads 1 --seed 5 --log-every 1 >"$W/train.log" 2>&1 || {
  cat "$W/train.log" >&2
  exit 1
}
ck=$(ls "$W/run/checkpoints/"step-*.h5 | tail -n 1)
cp "$ck" "$OUT/checkpoint/resnet20-8x8.h5"

cp "$SRC"/inputs/*.ini "$OUT/ini/"
rm -rf "$W"
echo "corpus in $OUT: $(ls "$OUT/shard" | wc -l) shards, $(ls "$OUT/jpeg" | wc -l) JPEGs, 1 checkpoint, $(ls "$OUT/ini" | wc -l) configs"
