#!/usr/bin/env python3
"""The 16-bit conversions of include/scaletrain/core/half.hpp against PyTorch's own
(Tensor.half(), Tensor.bfloat16(): round to nearest, ties to even). They are the wire format of
--grad-compression and the storage format of mixed precision, so every bit matters.

Inputs: for fp16, every float32 whose top 19 bits (sign, exponent, the 10 mantissa bits fp16
keeps) take any value, with the 13 dropped bits at the rounding boundaries (0, 1, just below and
at and just above half, all ones): each fp16 interval's ties and near-ties, every exponent from
subnormal to overflow to inf and NaN. For bf16 the same over its 16 dropped bits. Then a million
random bit patterns. Bits must be equal, except that any NaN must give a NaN (payloads may differ).
Back to float32: all 65,536 patterns of each format, bitwise (NaN: a NaN).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

BIN = os.environ.get("ST_BIN", "build/bin")
HELPER = os.path.join(BIN, "scaletrain_torch_half_helper")


def boundary_patterns(kept_bits, dropped):
    """uint32 patterns: every value of the top `kept_bits` bits, each with the dropped-bit values."""
    shift = 32 - kept_bits
    high = np.arange(1 << kept_bits, dtype=np.uint64) << np.uint64(shift)
    low = np.array(dropped, dtype=np.uint64)
    return (high[:, None] | low[None, :]).reshape(-1).astype(np.uint32)


def check_bits(name, ours, theirs, is_nan_in):
    nan_ours = (ours & 0x7FFF) > 0x7C00 if name == "fp16" else (ours & 0x7FFF) > 0x7F80
    bad_nan = is_nan_in & ~nan_ours
    bad = (~is_nan_in) & (ours != theirs)
    if bad.any() or bad_nan.any():
        idx = np.flatnonzero(bad | bad_nan)[:5]
        sys.exit(f"FAIL: {name}: {int(bad.sum())} values and {int(bad_nan.sum())} NaNs differ, e.g. indices {idx}")
    print(f"ok: {name}: {ours.size} conversions equal to PyTorch's ({int(is_nan_in.sum())} NaNs stay NaN)")


def main():
    rng = np.random.default_rng(7)
    fp16_edges = boundary_patterns(19, [0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF])
    bf16_edges = boundary_patterns(16, [0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF])
    random = rng.integers(0, 1 << 32, size=1_000_000, dtype=np.uint64).astype(np.uint32)
    bits = np.concatenate([fp16_edges, bf16_edges, random])
    values = bits.view(np.float32)
    with tempfile.TemporaryDirectory() as d:
        paths = [os.path.join(d, n) for n in ("in.f32", "fp16.u16", "bf16.u16", "from_fp16.f32", "from_bf16.f32")]
        values.tofile(paths[0])
        subprocess.run([HELPER] + paths, check=True)
        ours_fp16 = np.fromfile(paths[1], dtype=np.uint16)
        ours_bf16 = np.fromfile(paths[2], dtype=np.uint16)
        from_fp16 = np.fromfile(paths[3], dtype=np.float32)
        from_bf16 = np.fromfile(paths[4], dtype=np.float32)
    t = torch.from_numpy(values.copy())
    theirs_fp16 = t.half().view(torch.int16).numpy().view(np.uint16)
    theirs_bf16 = t.bfloat16().view(torch.int16).numpy().view(np.uint16)
    is_nan = np.isnan(values)
    check_bits("fp16", ours_fp16, theirs_fp16, is_nan)
    check_bits("bf16", ours_bf16, theirs_bf16, is_nan)

    every = torch.arange(65536, dtype=torch.int32).to(torch.int16)
    for name, ours, theirs in (("fp16", from_fp16, every.view(torch.float16).float().numpy()),
                               ("bf16", from_bf16, every.view(torch.bfloat16).float().numpy())):
        nan = np.isnan(theirs)
        same = np.where(nan, np.isnan(ours), ours.view(np.uint32) == theirs.view(np.uint32))
        if not same.all():
            sys.exit(f"FAIL: {name} to float32: {int((~same).sum())} of 65536 differ, e.g. {np.flatnonzero(~same)[:5]}")
        print(f"ok: {name} to float32: all 65536 patterns equal to PyTorch's")
    print("PASS")


if __name__ == "__main__":
    main()
