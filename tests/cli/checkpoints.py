"""Checkpoint checks for the command-line tests, written from docs/checkpoint-format.md with h5py
and zlib alone (an independent reading of the format, not scaletrain's own code).

  checkpoints.py verify FILE|RUN_DIR...   every published checkpoint verifies (CRC-32 as documented)
  checkpoints.py latest RUN_DIR           prints the file `latest` names; it must exist and verify
  checkpoints.py same A B                 every dataset of A and B is bitwise equal (files or run dirs)
  checkpoints.py step FILE|RUN_DIR        prints the checkpoint's optimizer step
"""
import glob
import json
import os
import sys
import zlib

import h5py
import numpy as np


def latest(run):
    folder = os.path.join(run, "checkpoints")
    with open(os.path.join(folder, "latest")) as f:
        return os.path.join(folder, f.read().strip())


def resolve(path):
    return latest(path) if os.path.isdir(path) else path


def datasets(f):
    out = {}
    f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def verify(path):
    """The documented checksum: CRC-32 of every dataset's float32 bytes in path order, then the
    /run attribute `state`."""
    with h5py.File(path, "r") as f:
        assert int(f.attrs["scaletrain_checkpoint_format"]) == 2, path
        crc = 0
        for name, value in sorted(datasets(f).items()):
            crc = zlib.crc32(np.ascontiguousarray(value, dtype="<f4").tobytes(), crc)
        state = f["run"].attrs["state"] if "run" in f else ""
        crc = zlib.crc32(state.encode() if isinstance(state, str) else state, crc)
        stored = int(f.attrs["checksum_crc32"])
        assert crc == stored, f"{path}: CRC-32 {crc}, the file records {stored}"
        if state:
            json.loads(state)  # the run state is JSON


def published(run):
    return sorted(glob.glob(os.path.join(run, "checkpoints", "step-*.h5")))


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "verify":
        files = [p for a in args for p in (published(a) if os.path.isdir(a) else [a])]
        assert files, f"no checkpoints in {args}"
        for p in files:
            verify(p)
        print(f"{len(files)} checkpoint(s) verify")
    elif command == "latest":
        path = latest(args[0])
        verify(path)
        print(path)
    elif command == "same":
        a, b = (h5py.File(resolve(p), "r") for p in args)
        da, db = datasets(a), datasets(b)
        assert sorted(da) == sorted(db), (sorted(set(da) ^ set(db)))[:5]
        differ = [k for k in da if not np.array_equal(da[k], db[k])]
        assert not differ, f"{len(differ)} of {len(da)} datasets differ, e.g. {differ[:4]}"
        print(f"{len(da)} datasets bitwise equal")
    elif command == "step":
        with h5py.File(resolve(args[0]), "r") as f:
            print(int(f.attrs["step"]))
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
