#!/usr/bin/env python3
"""Writes the advisor's calibrations from published figures (share/advisor/calibrations/):
V100 ResNet-50 (MLPerf v0.5 and v0.6, NVIDIA MXNet, mixed precision) and V100 NCF (NVIDIA PyTorch,
mixed precision). Every number below names its source (docs/scaling-model-sources.md has the
sources in full; docs/scaling-model.md "Shipped calibrations" the reasoning). Run from the
repository root:  /usr/bin/python3 tools/advisor/published_calibrations.py

What published figures do not give is derived here, openly:
- The gradient buckets (sizes in backward order, and when backward makes each ready) come from the
  model's structure: torchvision's ResNet-50 (the layout scaletrain's ResNet-50 follows), bucketed
  as scaletrain's plan_buckets does, each bucket ready when backward has done the FLOPs of every
  layer after its earliest parameter (backward FLOPs taken as twice forward's, layer by layer).
- The fixed part of a step (what does not scale with the batch) is not published for one V100:
  kernel launches (a ResNet-50 training step runs on the order of a thousand kernels; at ~5 us
  each, ~5 ms) and the optimizer (one pass over the parameters and its state in HBM2 at ~900
  GB/s). The rest of the published one-node step is per sample.
"""
import json
import os

import torch
import torchvision

MIB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "share", "advisor", "calibrations")
V100_HBM_BPS = 900e9         # V100 SXM2 HBM2 bandwidth (NVIDIA V100 datasheet: 900 GB/s)
KERNEL_LAUNCH_S = 5e-6       # per kernel, order of magnitude on V100 with CUDA 10 (not hidden at small batch)


def plan_buckets(sizes_backward_order, bucket_mb):
    """scaletrain's comm::plan_buckets: walking the parameters in backward order, a parameter joins
    the current bucket while it stays within bucket_mb MiB; else it starts a new one. Returns lists
    of indices (into sizes_backward_order)."""
    cap = bucket_mb * MIB
    buckets, current, used = [], [], 0
    for i, size in enumerate(sizes_backward_order):
        if current and used + size > cap:
            buckets.append(current)
            current, used = [], 0
        current.append(i)
        used += size
    if current:
        buckets.append(current)
    return buckets


def resnet50_layout(bytes_per_value, bucket_mb, image=224):
    """(bucket bytes, ready fractions) of torchvision's ResNet-50 in backward order."""
    model = torchvision.models.resnet50()
    flops = {}

    def hook(module, inputs, output):
        if isinstance(module, torch.nn.Conv2d):
            k = module.kernel_size[0] * module.kernel_size[1] * module.in_channels // module.groups
            flops[module] = 2 * k * output.numel()
        elif isinstance(module, torch.nn.Linear):
            flops[module] = 2 * module.in_features * module.out_features
        elif isinstance(module, torch.nn.BatchNorm2d):
            flops[module] = 4 * output.numel()  # normalise, scale and shift: a few per element

    for m in model.modules():
        m.register_forward_hook(hook)
    with torch.no_grad():
        model(torch.zeros(1, 3, image, image))
    # Parameters in registration order with the FLOPs of the module that owns them.
    owners = [(p, m) for m in model.modules() for p in m.parameters(recurse=False)]
    sizes = [p.numel() * bytes_per_value for p, _ in reversed(owners)]
    modules = [m for _, m in reversed(owners)]
    total = sum(flops.values())
    # Backward runs the modules in reverse; a module's parameters are ready once it is done.
    order = [m for m in reversed(list(flops.keys()))]
    done, ready_at = 0.0, {}
    for m in order:
        done += flops[m]
        ready_at[m] = done / total
    buckets = plan_buckets(sizes, bucket_mb)
    bucket_bytes = [sum(sizes[i] for i in b) for b in buckets]
    fractions = [max(ready_at[modules[i]] for i in b) for b in buckets]
    fractions[-1] = 1.0
    return bucket_bytes, fractions, sum(p.numel() for p, _ in owners)


def resnet50(name, one_node_step_s, source_step):
    """A V100 mixed-precision ResNet-50 calibration from a published one-node steady step time at
    208 images per GPU (NVIDIA's MLPerf MXNet runs; fp16 gradients are all-reduced)."""
    bucket_bytes, fractions, params = resnet50_layout(2, 25)
    kernels = 1000
    fixed = kernels * KERNEL_LAUNCH_S
    # Optimizer: fp32 master weights, momentum, the fp16 gradient and fp16 weights: read and write.
    optimizer = params * (4 + 4) * 2 / V100_HBM_BPS + params * (2 + 2) / V100_HBM_BPS
    per_sample = (one_node_step_s - fixed - optimizer) / 208
    # Backward does about twice the FLOPs of forward, for the fixed and the per-sample part alike.
    fwd = {"fixed_s": fixed / 3, "per_sample_s": per_sample / 3}
    bwd = {"fixed_s": 2 * fixed / 3, "per_sample_s": 2 * per_sample / 3}
    at = lambda c, b: c["fixed_s"] + c["per_sample_s"] * b
    return {
        "format": "scaletrain-calibration", "version": 1,
        "model": "resnet50", "device": "V100-SXM2-16GB (DGX-1)", "precision": "mixed",
        "source": ("published: " + source_step + "; fixed part assumed " + f"{fixed*1e3:.1f} ms (~{kernels} kernels x "
                   f"{KERNEL_LAUNCH_S*1e6:.0f} us), optimizer {optimizer*1e3:.2f} ms ({params} parameters through "
                   "HBM2 at 900 GB/s); buckets from torchvision's ResNet-50 (fp16 gradients, 25 MiB, ready "
                   "fractions from backward FLOPs); written by tools/advisor/published_calibrations.py"),
        "points": [{"batch": 208, "forward_s": at(fwd, 208), "backward_s": at(bwd, 208), "optimizer_s": optimizer}],
        "forward": fwd, "backward": bwd, "optimizer_s": optimizer,
        "gradient_bytes": sum(bucket_bytes), "bucket_mb": 25,
        "buckets": [{"bytes": b, "ready_fraction": f} for b, f in zip(bucket_bytes, fractions)],
        "input_samples_per_s": 0, "default_batch": 208, "train_samples": 1281167,
    }


def ncf():
    """MLPerf NCF (NeuMF on ml-20m: 138,493 users, 26,744 items, MF dimension 64, MLP layers
    256-256-128-64) on one V100, mixed precision: NVIDIA DeepLearningExamples PyTorch NCF README
    (21.04), 1 GPU at batch 1,048,576: 21.84 M samples/s, i.e. 48.01 ms per step."""
    users, items, mf, mlp = 138493, 26744, 64, 128
    mlp_layers = [(256, 256), (256, 128), (128, 64)]
    dense = sum(i * o + o for i, o in mlp_layers) + (64 + mf) + 1  # MLP, then the final 128 -> 1
    half = 2  # fp16 gradients (apex, --fp16)
    # Backward order: the final layer and the MLP first, then the embeddings, which backward reaches
    # last (their gradients are ready only when backward ends). One bucket per table here: each is
    # near or above 25 MiB except the item tables, which share one.
    buckets = [
        {"bytes": dense * half, "ready_fraction": 0.5},
        {"bytes": items * (mf + mlp) * half, "ready_fraction": 1.0},
        {"bytes": users * mf * half, "ready_fraction": 1.0},
        {"bytes": users * mlp * half, "ready_fraction": 1.0},
    ]
    params = dense + (users + items) * (mf + mlp)
    batch = 1048576
    step_1gpu = batch / 21.84e6
    # Adam: fp32 master weights, m and v, fp16 gradient and weights: read and write.
    optimizer = params * (4 + 4 + 4) * 2 / V100_HBM_BPS + params * (2 + 2) / V100_HBM_BPS
    kernels = 60
    fixed = kernels * KERNEL_LAUNCH_S
    per_sample = (step_1gpu - fixed - optimizer) / batch
    fwd = {"fixed_s": fixed / 3, "per_sample_s": per_sample / 3}
    bwd = {"fixed_s": 2 * fixed / 3, "per_sample_s": 2 * per_sample / 3}
    at = lambda c, b: c["fixed_s"] + c["per_sample_s"] * b
    return {
        "format": "scaletrain-calibration", "version": 1,
        "model": "ncf", "device": "V100-SXM2-16GB (DGX-1)", "precision": "mixed",
        "source": ("published: NVIDIA DeepLearningExamples PyTorch/Recommendation/NCF README (21.04), DGX-1 1 GPU "
                   "mixed precision, batch 1,048,576: 21.84 M samples/s (48.01 ms per step); fixed part assumed "
                   f"{fixed*1e3:.2f} ms ({kernels} kernels), optimizer {optimizer*1e3:.2f} ms (Adam over {params} "
                   "parameters through HBM2 at 900 GB/s); buckets from the NeuMF layout (fp16 gradients); written "
                   "by tools/advisor/published_calibrations.py"),
        "points": [{"batch": batch, "forward_s": at(fwd, batch), "backward_s": at(bwd, batch), "optimizer_s": optimizer}],
        "forward": fwd, "backward": bwd, "optimizer_s": optimizer,
        "gradient_bytes": sum(b["bytes"] for b in buckets), "bucket_mb": 25, "buckets": buckets,
        "input_samples_per_s": 0, "default_batch": 131072, "train_samples": 99308850,
    }


def write(name, calibration):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        json.dump(calibration, f, indent=2)
        f.write("\n")
    print("wrote", os.path.relpath(path))


if __name__ == "__main__":
    write("resnet50-v100-mixed-mlperf-v0.6.json",
          resnet50("v0.6", 0.1483, "MLPerf v0.6 NVIDIA dgx1_ngc19.05_mxnet resnet result_0: steady epoch 913 s "
                   "at 8 x 208 images (148.3 ms per step, 1,402.7 images/s per GPU)"))
    write("resnet50-v100-mixed-mlperf-v0.5.json",
          resnet50("v0.5", 0.1642, "MLPerf v0.5 NVIDIA dgx1_ngc18.11_mxnet resnet result_0: 164.2 ms per step at "
                   "8 x 208 images (1,266.6 images/s per GPU)"))
    write("ncf-v100-mixed-dle.json", ncf())
