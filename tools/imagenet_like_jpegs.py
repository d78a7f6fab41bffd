#!/usr/bin/env python3
"""ImageNet-like JPEGs for the JPEG benchmarks: each about 500x375 (four sizes in turn), quality
90, a smooth pattern with noise and edges, seeded, so that decoding costs what photographs of that
size cost.

  imagenet_like_jpegs.py ROOT TRAIN    ImageNet's folder layout (tools/bench_jpeg_pipeline.sh,
                                       tools/bench_epoch_start.sh): 10 classes (n00000000 ...) of
                                       TRAIN / 10 training images each, and 50 validation images
                                       (scaletrain-data convert imagenet wants both splits)
  imagenet_like_jpegs.py --flat DIR N  DIR/img0.jpg ... (tools/bench_jpeg.sh): the first N of the
                                       same sequence
"""
import os
import sys

import numpy as np
from PIL import Image


SIZES = [(500, 375), (500, 333), (375, 500), (500, 400)]


def image(rng, i):
    w, h = SIZES[i % len(SIZES)]
    y, x = np.mgrid[0:h, 0:w] / 50.0
    a, b = rng.uniform(0.3, 1.5, 2)
    img = np.stack([128 + 60 * np.sin(x * a + y * 0.7), 128 + 60 * np.cos(x * 0.5 - y * b),
                    128 + 50 * np.sin(x * y * 0.05)], -1)
    img[(x * 50 // 60 + y * 50 // 45) % 7 == 0] = 30  # some edges
    img += rng.normal(0, 12, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def imagenet_layout(root, n):
    rng = np.random.default_rng(0)
    for split, count in (("train", n), ("val", 50)):
        for i in range(count):
            d = os.path.join(root, split, f"n{i % 10:08d}")
            os.makedirs(d, exist_ok=True)
            image(rng, i).save(os.path.join(d, f"{split}_{i}.JPEG"), quality=90)


def flat(root, n):
    rng = np.random.default_rng(0)
    for i in range(n):
        image(rng, i).save(os.path.join(root, f"img{i}.jpg"), quality=90)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--flat":
        flat(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 3:
        imagenet_layout(sys.argv[1], int(sys.argv[2]))
    else:
        sys.exit(__doc__)
