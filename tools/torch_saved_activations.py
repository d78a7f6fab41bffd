#!/usr/bin/env python3
"""torch_saved_activations.py [BATCH ...]: what PyTorch keeps for backward in a ResNet-50 training
forward (torchvision, channels_last, fp32, 224x224, on the CPU): the bytes of every distinct storage
autograd saves (the weights among them), through saved_tensors_hooks. The independent figure beside
scaletrain's device.peak_in_use_bytes on the CPU (tools/bench_memory.sh); on a GPU, PyTorch's
max_memory_allocated adds its parameters' gradients, optimizer state and transients to it. Bytes
only, no timing: which BLAS torch runs on does not change them (tools/torch_blas.py is for the
speed baselines)."""
import sys

import torch
import torchvision


def saved_bytes(batch):
    model = torchvision.models.resnet50().to(memory_format=torch.channels_last)
    x = torch.randn(batch, 3, 224, 224).to(memory_format=torch.channels_last)
    storages = {}

    def pack(t):
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()  # torch 2 / 1.13
        storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(storages.values())


if __name__ == "__main__":
    torch.manual_seed(0)
    for b in [int(a) for a in sys.argv[1:]] or [8, 16]:
        print(f"pytorch resnet50 batch {b}: saved for backward {saved_bytes(b) / 1e6:.1f} MB")
