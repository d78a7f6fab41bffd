#!/usr/bin/env python3
"""PyTorch's ResNet-50 training throughput on one GPU, the baseline for tools/bench_gpu_resnet50.sh
(issue 10, section 7): the same model, batch and SGD settings as scaletrain's run (momentum 0.9,
weight decay 5e-5, label smoothing 0.1, fp32 weights and activations, channels_last, synthetic
224x224 images already on the GPU, so the input pipeline is not measured), with TF32 off (what
scaletrain computes: plain fp32) and on (what PyTorch does by default for convolutions).

  python3 tools/bench_torch_resnet50_gpu.py --batch-sizes 64,128 --steps 50 --warmup 10 \
      [--precisions fp32,amp-fp16,amp-bf16] [--peak-tflops 989]

Prints one line per batch size and setting: "torch resnet50 batch B tf32 off|on: N images/s", and
with --precisions amp-fp16 / amp-bf16 "torch resnet50 batch B amp-fp16: N images/s": torch.autocast
in that format (fp32 weights, the autocast policy's per-op casts), channels_last, SGD momentum, and
in fp16 a GradScaler, as PyTorch's AMP recipe has it. With --profile amp-fp16 those runs are then
profiled (torch.profiler): the GPU kernels' time per step, by kind and the longest, to read beside
scaletrain's --op-times. Each line also gives
torch.cuda.max_memory_allocated, and for the 16-bit runs the fraction of --peak-tflops (the GPU's
dense fp16 tensor peak) reached at about 24.6 GFLOP per trained image.
torchvision's resnet50 where installed, else the same architecture defined below.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Bottleneck(nn.Module):
    # torchvision's ResNet-50 v1.5 block: the stride on the 3x3 convolution.
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return F.relu(y + (self.downsample(x) if self.downsample is not None else x))


class ResNet50(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for width, count, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(count):
                blocks.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * 4
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))


def make_model():
    try:
        import torchvision
        return torchvision.models.resnet50(num_classes=1000), "torchvision"
    except Exception:
        return ResNet50(1000), "own definition"


# Kernel names to the kinds scaletrain's op table can be read against (a rough reading: the names are
# cuDNN's, cuBLAS's and PyTorch's own and change between versions).
KERNEL_KINDS = (("convolution or GEMM", ("xmma", "conv", "implicit", "gemm", "cutlass", "wgrad", "dgrad", "fprop")),
                ("batch norm", ("bn_", "batch_norm", "batchnorm", "welford")),
                ("pooling", ("pool",)),
                ("optimizer and scaler", ("multi_tensor", "foreach", "amp_", "sgd")),
                ("element-wise, casts and the rest", ("",)))


def kernel_kind(name):
    low = name.lower()
    return next(kind for kind, needles in KERNEL_KINDS if any(n in low for n in needles))


def profile_kernels(step, steps, label):
    """The GPU kernels of `steps` steps under torch.profiler: time per step in total, by kind and
    for the longest kernels. A failure here is printed, not raised: it must not cost the figures."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
        kernels = []
        for e in prof.key_averages():
            t = getattr(e, "self_device_time_total", None)
            t = getattr(e, "self_cuda_time_total", 0) if t is None else t
            if t > 0:
                kernels.append((t / 1e3 / steps, e.count / steps, e.key))  # ms and calls per step
        kernels.sort(reverse=True)
        total = sum(k[0] for k in kernels)
        print(f"torch {label} kernels per step (torch.profiler, {steps} steps): {total:.2f} ms in "
              f"{sum(k[1] for k in kernels):.0f} kernel launches")
        kinds = {}
        for ms, calls, name in kernels:
            kinds[kernel_kind(name)] = kinds.get(kernel_kind(name), 0.0) + ms
        for kind, _ in KERNEL_KINDS:
            if kind in kinds:
                print(f"  {kind:<34} {kinds[kind]:9.3f} ms {100 * kinds[kind] / total:5.1f}%")
        for ms, calls, name in kernels[:15]:
            print(f"    {name[:70]:<70} {calls:6.1f} calls {ms:8.3f} ms")
    except Exception as e:  # noqa: BLE001 (any failure of the profiler)
        print(f"torch {label}: the profile failed: {type(e).__name__}: {e}")


def bench(batch, steps, warmup, mode, peak_tflops, profile_steps=0):
    tf32 = mode == "fp32-tf32"
    half = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}.get(mode)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True  # cuDNN's algorithm search, as scaletrain caches per shape
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats()
    model, origin = make_model()
    model = model.cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5)
    scaler = None
    if half == torch.float16:  # torch.amp.GradScaler("cuda") since PyTorch 2.3, torch.cuda.amp's before
        scaler = torch.amp.GradScaler("cuda") if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()
    x = torch.randn(batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device="cuda")
    model.train()

    def step():
        with torch.autocast("cuda", dtype=half or torch.float32, enabled=half is not None):
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    rate = batch * steps / (time.perf_counter() - t0)
    setting = {"fp32": "tf32 off", "fp32-tf32": "tf32 on"}.get(mode, mode)
    tensor = ""
    if half is not None and peak_tflops > 0:
        tensor = (f"; {rate * 24.6e9 / 1e12:.1f} TFLOP/s, {100 * rate * 24.6e9 / (peak_tflops * 1e12):.1f}% of the "
                  f"dense fp16 tensor peak ({peak_tflops:.0f})")
    print(f"torch resnet50 batch {batch} {setting}: {rate:.1f} images/s "
          f"({origin}, channels_last, {steps} steps after {warmup}; peak memory "
          f"{torch.cuda.max_memory_allocated() / 2**30:.2f} GiB allocated){tensor}", flush=True)
    if profile_steps > 0:
        profile_kernels(step, profile_steps, f"resnet50 batch {batch} {setting}")
    del model, opt, x, y
    torch.cuda.empty_cache()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch-sizes", default="64,128")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--precisions", default="fp32", help="fp32 (TF32 off and on), amp-fp16, amp-bf16, comma-separated")
    p.add_argument("--peak-tflops", type=float, default=0.0, help="the GPU's dense fp16 tensor peak (0: not known)")
    p.add_argument("--profile", default="", help="precisions (comma-separated) whose runs are then profiled: "
                   "their GPU kernels per step, by kind and the longest, after the timed steps")
    p.add_argument("--profile-steps", type=int, default=3)
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no GPU visible to PyTorch")
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name(0)}")
    modes = []
    for precision in a.precisions.split(","):
        if precision not in ("fp32", "amp-fp16", "amp-bf16"):
            raise SystemExit(f"--precisions: '{precision}' is not fp32, amp-fp16 or amp-bf16")
        modes += ["fp32", "fp32-tf32"] if precision == "fp32" else [precision]
    profiled = set(m for m in a.profile.split(",") if m)
    for batch in (int(b) for b in a.batch_sizes.split(",")):
        for mode in modes:
            bench(batch, a.steps, a.warmup, mode, a.peak_tflops, a.profile_steps if mode in profiled else 0)


if __name__ == "__main__":
    main()
