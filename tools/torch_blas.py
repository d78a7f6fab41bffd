"""Which BLAS PyTorch's CPU matrix products run on, for the benchmarks that compare us with it.

Debian's python3-torch calls whatever libblas.so.3 the system's alternative points at: Debian's
reference BLAS (netlib, unoptimised, many times slower) unless OpenBLAS is installed
(libopenblas0-pthread, which `make deps` installs). A baseline measured on the reference BLAS is
not PyTorch's speed, so every benchmark that runs PyTorch on the CPU calls require_fast_blas()
first: it prints the library a matrix product actually loaded and stops on the reference one.
ST_ALLOW_REFERENCE_BLAS=1 lets a run go on anyway (it then says so on stdout).
"""
import os
import sys


def loaded_blas():
    """The BLAS library mapped into this process after a matrix product ('' when none is)."""
    import torch

    a = torch.ones(64, 64)
    (a @ a).sum().item()
    found = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            name = os.path.basename(path)
            if ("blas" in name or "mkl" in name) and path not in found:
                found.append(path)
    return ", ".join(os.path.realpath(p) for p in found)


def is_reference_blas(path):
    """Debian's reference BLAS lives in .../blas/libblas.so.3 (OpenBLAS in .../openblas-*/)."""
    return "/blas/libblas.so" in path and "openblas" not in path


def require_fast_blas(what="this benchmark"):
    path = loaded_blas()
    print(f"PyTorch BLAS: {path or 'none loaded (its own kernels)'}")
    if path and is_reference_blas(path):
        message = (f"{what}: PyTorch runs its matrix products on the reference BLAS ({path}), many times "
                   "slower than PyTorch's real speed; install OpenBLAS (make deps installs libopenblas0-pthread)")
        if os.environ.get("ST_ALLOW_REFERENCE_BLAS") == "1":
            print(f"warning: {message}; going on (ST_ALLOW_REFERENCE_BLAS=1)")
        else:
            sys.exit(message)
    return path
