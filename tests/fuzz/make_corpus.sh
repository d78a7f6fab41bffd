#!/usr/bin/env bash
# make_corpus.sh BIN OUT: the fuzz targets' seed corpora, made by the project's own tools
# (never checked in), deterministically, so that a regression recipe (tests/fuzz/regressions.txt:
# a corpus file name, offsets and bytes) damages the same bytes of the same layout every time:
#   OUT/shard/       raw shards of `scaletrain-data synthetic`, a JPEG shard of
#                    `scaletrain-data convert imagenet --encoding jpeg` over tiny PIL JPEGs
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
