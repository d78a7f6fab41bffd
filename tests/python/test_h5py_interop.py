#!/usr/bin/python3
"""The dataset format between h5py and scaletrain, both ways.

1. A dataset written by h5py to docs/dataset-format.md, in the variants h5py users produce
   (variable- and fixed-length strings, int32/int64 attributes, float32/float64 mean and std,
   contiguous / gzip-compressed / row-chunked images, big-endian labels; raw shards of format
   versions 1 and 2 side by side), is accepted by
   `scaletrain-data inspect`, and the training data loader (through `scaletrain-data bench
   --dump`) yields exactly (pixel / 255 - mean) / std of the samples its plan names.
2. Files scaletrain writes are read by h5py with the right values: Fashion-MNIST converted by
   `scaletrain-data convert` equals the idx source pixel for pixel and label for label.
Env: ST_BIN (build/bin), ST_TMP (scratch). Exits non-zero on failure.
"""
import gzip
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

BIN = os.path.join(os.environ["ST_BIN"], "scaletrain-data")
TMP = os.path.join(os.environ["ST_TMP"], "h5py_interop")
FASHION = "/usr/share/datasets/fashion-mnist"
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(*args, expect_ok=True):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)
    if expect_ok and p.returncode != 0:
        print(p.stdout, p.stderr)
        raise SystemExit(f"FAIL: {' '.join(args)} exited {p.returncode}")
    return p


def write_h5py_dataset(root):
    """Two splits; train has three shards in three storage variants."""
    rng = np.random.default_rng(5)
    h, w, c, k = 6, 5, 3, 4
    mean = [0.4, 0.5, 0.6]
    std = [0.2, 0.25, 0.3]
    shards = {}
    sizes = {"train": [37, 1, 50], "val": [9]}
    for split, ns in sizes.items():
        os.makedirs(os.path.join(root, split))
        for i, n in enumerate(ns):
            images = rng.integers(0, 256, size=(n, h, w, c), dtype=np.uint8)
            labels = rng.integers(0, k, size=n).astype(np.int32)
            path = os.path.join(root, split, f"part{i}.h5")
            with h5py.File(path, "w") as f:
                if i == 0:  # h5py defaults: str -> variable-length, int -> int64, list -> float64
                    f.attrs["scaletrain_format"] = 1
                    f.attrs["task"] = "image_classification"
                    f.attrs["num_classes"] = k
                    f.attrs["mean"] = mean
                    f.attrs["std"] = std
                    f["images"] = images  # contiguous
                    f["labels"] = labels
                elif i == 1:  # numpy scalars and fixed-length bytes
                    f.attrs["scaletrain_format"] = np.int32(1)
                    f.attrs["task"] = np.bytes_(b"image_classification")
                    f.attrs["num_classes"] = np.int32(k)
                    f.attrs["mean"] = np.array(mean, np.float64)
                    f.attrs["std"] = np.array(std, np.float64)
                    f.create_dataset("images", data=images, chunks=(1, h, w, c))
                    f.create_dataset("labels", data=labels.astype(">i4"))  # big-endian int32
                else:
                    f.attrs.create("scaletrain_format", 2, dtype=np.int64)  # raw: 1 and 2 alike
                    f.attrs.create("task", "image_classification",
                                   dtype=h5py.string_dtype("ascii", len("image_classification")))
                    f.attrs["num_classes"] = np.int64(k)
                    f.attrs["mean"] = np.array(mean, np.float64)  # float32 would change the values
                    f.attrs["std"] = np.array(std, np.float64)
                    f.create_dataset("images", data=images, chunks=(16, h, w, c), compression="gzip")
                    f.create_dataset("labels", data=labels, chunks=(16,))
            shards.setdefault(split, []).append((images, labels))
    return shards, mean, std


def test_h5py_written_dataset():
    root = os.path.join(TMP, "from_h5py")
    shards, mean, std = write_h5py_dataset(root)
    out = run("inspect", root).stdout
    print(out)
    check("split train: 88 samples in 3 shards" in out, "inspect accepts the h5py dataset (train)")
    check("split val: 9 samples in 1 shard" in out and "6x5x3" in out and "4 classes" in out,
          "inspect reports val, shape and classes")
    info = json.loads(run("inspect", root, "--json").stdout)
    check(info["splits"]["train"]["mean"] == mean and info["splits"]["train"]["std"] == std,
          "mean/std read back exactly")

    # float32 mean/std are accepted too (values as stored).
    root32 = os.path.join(TMP, "from_h5py_f32")
    shutil.copytree(root, root32)
    for split in ("train", "val"):
        for name in os.listdir(os.path.join(root32, split)):
            with h5py.File(os.path.join(root32, split, name), "r+") as f:
                f.attrs["mean"] = np.array(mean, np.float32)
                f.attrs["std"] = np.array(std, np.float32)
    info32 = json.loads(run("inspect", root32, "--json").stdout)
    got = info32["splits"]["val"]["mean"]  # JSON prints 9 significant digits
    check(np.allclose(got, np.array(mean, np.float32), rtol=0, atol=1e-8) and got != mean,
          "float32 mean accepted (values as stored)")

    all_images = np.concatenate([s[0] for s in shards["train"]])
    all_labels = np.concatenate([s[1] for s in shards["train"]])
    mean_a = np.array(mean).reshape(1, 1, 1, 3)
    std_a = np.array(std).reshape(1, 1, 1, 3)
    expected_all = ((all_images / 255.0 - mean_a) / std_a).astype(np.float32)

    # Evaluation plan: file order, every sample (88 = 8 batches of 11).
    dump = os.path.join(TMP, "eval_dump.h5")
    run("bench", root, "--no-shuffle", "--no-drop-last", "--batch-size", "11", "--dump", dump,
        "--dump-batches", "100")
    with h5py.File(dump, "r") as f:
        ids, images, labels = f["ids"][:], f["images"][:], f["labels"][:]
    check(np.array_equal(ids, np.arange(88)), "eval plan is every sample in file order")
    check(np.array_equal(labels, all_labels), "loader labels equal the h5py labels (all storage variants)")
    check(np.array_equal(images, expected_all), "loader images equal (pixel/255 - mean)/std exactly")

    # --io mmap maps uncompressed images (contiguous or chunked along rows) and refuses a
    # compressed shard by name; without it, the same batches as posix.
    p = run("bench", root, "--io", "mmap", "--no-shuffle", "--no-drop-last", "--batch-size", "11",
            expect_ok=False)
    last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "(no message)"
    check(p.returncode != 0 and "part2.h5" in p.stderr and "--io mmap needs uncompressed" in p.stderr,
          "--io mmap refuses the gzip shard by name: " + last)
    root_plain = os.path.join(TMP, "from_h5py_uncompressed")
    shutil.copytree(root, root_plain)
    os.remove(os.path.join(root_plain, "train", "part2.h5"))
    dump_mmap = os.path.join(TMP, "eval_dump_mmap.h5")
    run("bench", root_plain, "--io", "mmap", "--no-shuffle", "--no-drop-last", "--batch-size", "7",
        "--dump", dump_mmap, "--dump-batches", "100")
    with h5py.File(dump_mmap, "r") as f:
        ids, images, labels = f["ids"][:], f["images"][:], f["labels"][:]
    n_plain = len(shards["train"][0][1]) + len(shards["train"][1][1])
    check(np.array_equal(ids, np.arange(n_plain)) and np.array_equal(labels, all_labels[:n_plain]) and
          np.array_equal(images, expected_all[:n_plain]),
          "--io mmap reads contiguous and row-chunked h5py shards exactly")

    # Training plan: shuffled, 2 full batches; the samples are those the plan names.
    run("bench", root, "--batch-size", "32", "--seed", "9", "--dump", dump, "--dump-batches", "100")
    with h5py.File(dump, "r") as f:
        ids, images, labels = f["ids"][:], f["images"][:], f["labels"][:]
    check(len(ids) == 64 and len(set(ids.tolist())) == 64, "shuffled plan: 64 distinct samples")
    check(not np.array_equal(ids, np.arange(64)), "shuffled plan is not file order")
    check(np.array_equal(labels, all_labels[ids]) and np.array_equal(images, expected_all[ids]),
          "shuffled batches hold exactly the planned samples")


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(magic & 0xFF)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * len(dims)).reshape(dims)


def check_manifest(split_dir, names):
    """manifest.json lists each shard's size and XXH3-64, computed here with python3-xxhash."""
    import json, xxhash
    with open(os.path.join(split_dir, "manifest.json")) as f:
        m = json.load(f)
    check(m["format"] == "scaletrain-manifest" and m["version"] == 1 and m["checksum"] == "xxh3-64",
          f"{split_dir}: manifest header {m}")
    want = []
    for name in names:
        data = open(os.path.join(split_dir, name), "rb").read()
        want.append({"file": name, "bytes": len(data), "xxh3": xxhash.xxh3_64_hexdigest(data)})
    check(m["shards"] == want, f"{split_dir}: manifest shards {m['shards']} != {want}")


def test_fashion_mnist_conversion():
    if not os.path.isdir(FASHION):
        print(f"SKIP: {FASHION} not installed")
        return
    out = os.path.join(TMP, "fm")
    run("convert", "fashion-mnist", "--source", FASHION, "--output", out, "--shards", "3",
        "--chunk-samples", "500")
    for split, prefix, n in (("train", "train", 60000), ("val", "t10k", 10000)):
        src_images = read_idx(os.path.join(FASHION, f"{prefix}-images-idx3-ubyte.gz"))
        src_labels = read_idx(os.path.join(FASHION, f"{prefix}-labels-idx1-ubyte.gz"))
        files = sorted(os.listdir(os.path.join(out, split)))
        names = [n for n in files if n.endswith(".h5")]
        check(files == ["manifest.json"] + [f"shard-0000{i}-of-00003.h5" for i in range(3)],
              f"{split}: files {files}")
        check_manifest(os.path.join(out, split), names)
        images, labels = [], []
        for name in names:
            with h5py.File(os.path.join(out, split, name), "r") as f:
                check(f.attrs["scaletrain_format"] == 2 and f.attrs["task"] in ("image_classification", b"image_classification")
                      and f.attrs["num_classes"] == 10, f"{split}/{name}: root attributes")
                check(f["images"].dtype == np.uint8 and f["labels"].dtype == np.int32,
                      f"{split}/{name}: dtypes uint8/int32")
                check(f["images"].chunks == (500, 28, 28, 1), f"{split}/{name}: chunked along samples")
                mean, std = f.attrs["mean"], f.attrs["std"]
                images.append(f["images"][:])
                labels.append(f["labels"][:])
        images = np.concatenate(images)
        labels = np.concatenate(labels)
        check(images.shape == (n, 28, 28, 1), f"{split}: {n} images of 28x28x1")
        first_last = (np.array_equal(images[0, :, :, 0], src_images[0])
                      and np.array_equal(images[-1, :, :, 0], src_images[-1]))
        check(first_last, f"{split}: first and last image equal the idx source")
        check(np.array_equal(images[:, :, :, 0], src_images), f"{split}: every pixel equals the idx source")
        check(np.array_equal(labels, src_labels.astype(np.int32)), f"{split}: every label equals the idx source")
        train_pixels = read_idx(os.path.join(FASHION, "train-images-idx3-ubyte.gz")).astype(np.float64) / 255.0
        check(abs(mean[0] - train_pixels.mean()) < 1e-12 and abs(std[0] - train_pixels.std()) < 1e-12,
              f"{split}: mean/std {mean[0]:.6f}/{std[0]:.6f} are those of the train images")


def main():
    shutil.rmtree(TMP, ignore_errors=True)
    os.makedirs(TMP)
    test_h5py_written_dataset()
    test_fashion_mnist_conversion()
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    shutil.rmtree(TMP, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
