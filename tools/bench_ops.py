#!/usr/bin/python3
"""PyTorch baseline for the CPU conv2d kernels: times conv2d forward + backward (data and filter)
at the ResNet-20 / Fashion-MNIST shapes, so scaletrain's oneDNN kernels can be compared with it.

Usage: OMP_NUM_THREADS=1 /usr/bin/python3 tools/bench_ops.py [--threads 1] [--batch 64] [--iters 60]
Prints one line per shape with the best time (ms) of forward, backward and their sum.
"""
import argparse
import sys
import os
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_blas import require_fast_blas  # noqa: E402
import torch.nn.functional as F

# (name, H=W, C in, C out, kernel, stride, padding): the convolutions of ResNet-20 on 28x28x1.
SHAPES = [
    ("28x28x16 3x3", 28, 16, 16, 3, 1, 1),
    ("14x14x32 3x3", 14, 32, 32, 3, 1, 1),
    ("7x7x64 3x3", 7, 64, 64, 3, 1, 1),
    ("stem 28x28x1->16", 28, 1, 16, 3, 1, 1),
    ("28x28x16->32 s2", 28, 16, 32, 3, 2, 1),
    ("1x1 16->32 s2", 28, 16, 32, 1, 2, 0),
]


def bench(batch, size, cin, cout, k, stride, pad, iters, channels_last):
    x = torch.randn(batch, cin, size, size, requires_grad=True)
    w = torch.randn(cout, cin, k, k, requires_grad=True)
    if channels_last:
        x = x.detach().to(memory_format=torch.channels_last).requires_grad_()
    best_fwd = best_bwd = best_total = float("inf")
    dy = None
    for it in range(iters):
        t0 = time.perf_counter()
        y = F.conv2d(x, w, stride=stride, padding=pad)
        t1 = time.perf_counter()
        if dy is None:
            dy = torch.randn_like(y)
        x.grad = None
        w.grad = None
        y.backward(dy)
        t2 = time.perf_counter()
        if it >= 5:
            best_fwd = min(best_fwd, t1 - t0)
            best_bwd = min(best_bwd, t2 - t1)
            best_total = min(best_total, t2 - t0)
    return best_fwd * 1e3, best_bwd * 1e3, best_total * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--iters", type=int, default=60)
    parser.add_argument("--channels-last", action="store_true", help="NHWC tensors in torch too")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    require_fast_blas("bench_ops")
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {args.threads} thread(s), batch {args.batch}, "
          f"{'channels_last' if args.channels_last else 'NCHW'}")
    for name, size, cin, cout, k, stride, pad in SHAPES:
        fwd, bwd, total = bench(args.batch, size, cin, cout, k, stride, pad, args.iters, args.channels_last)
        print(f"{name:20s} fwd {fwd:.3f} ms  bwd (data+filter) {bwd:.3f} ms  total(min) {total:.3f} ms")


if __name__ == "__main__":
    main()
