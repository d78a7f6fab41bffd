#!/usr/bin/env python3
"""How far PyTorch's own fp32 training on a GPU drifts from the same training on the CPU: the
independent measure of what the GPU tests' tolerances (tests/gpu/test_resnet50_step.sh,
test_resnet20_training.sh, test_shared_gpu_allreduce.sh) may expect of our GPU against our CPU.
Same shapes and optimiser settings as those tests, TF32 off, channels_last; both sides start from
the same weights and see the same batches.

  python3 tools/torch_gpu_cpu_divergence.py [--steps 50] [--threads 16]

Prints, for ResNet-50's one SGD step (16 images 64x64): the relative L2 difference of the update
w1 - w0 over all parameters and the largest per tensor; for ResNet-20 (batch 32, 32x32, constant
rate 0.05, momentum 0.9, weight decay 5e-4): the largest loss difference and the parameters' and
batch-norm statistics' relative L2 difference after 1, 10, 30 and --steps steps.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rel_l2(a, b):
    num = sum(float(((x - y) ** 2).sum()) for x, y in zip(a, b))
    den = sum(float((y ** 2).sum()) for y in b)
    return math.sqrt(num / den) if den > 0 else float("nan")


def worst_tensor(names, a, b):
    best = (0.0, "")
    for n, x, y in zip(names, a, b):
        d = float((y ** 2).sum())
        if d > 0:
            best = max(best, (math.sqrt(float(((x - y) ** 2).sum()) / d), n))
    return best


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNet20(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        layers, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                layers.append(Block(cin, cout, stride if i == 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.layers(F.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def learnable_batches(steps, batch, size, classes, seed):
    g = torch.Generator().manual_seed(seed)
    means = torch.rand(classes, 3, 1, 1, generator=g)
    out = []
    for _ in range(steps):
        labels = torch.randint(0, classes, (batch,), generator=g)
        x = means[labels] + 0.5 * torch.randn(batch, 3, size, size, generator=g)
        out.append((x, labels))
    return out


def train(model, device, batches, lr, wd, smoothing):
    model = model.to(device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=wd)
    losses, snapshots = [], {}
    for i, (x, y) in enumerate(batches, 1):
        x = x.to(device, memory_format=torch.channels_last)
        loss = F.cross_entropy(model(x), y.to(device), label_smoothing=smoothing)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
        snapshots[i] = ([p.detach().cpu().clone() for p in model.parameters()],
                        [b.detach().cpu().clone() for n, b in model.named_buffers() if "running" in n])
    return losses, snapshots


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--device", default="cuda", help="the side compared with the CPU (cpu: a dry run)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name(0) if args.device == 'cuda' else 'no GPU (dry run)'}, TF32 off, channels_last")

    import torchvision
    torch.manual_seed(11)
    r50 = torchvision.models.resnet50()
    names = [n for n, _ in r50.named_parameters()]
    w0 = [p.detach().clone() for p in r50.parameters()]
    batch = learnable_batches(1, 16, 64, 1000, 11)
    updates = {}
    for device in ("cpu", args.device):
        m = torchvision.models.resnet50()
        m.load_state_dict(r50.state_dict())
        _, snaps = train(m, device, batch, 0.1, 5e-5, 0.1)
        updates["cpu" if device == "cpu" and "cpu" not in updates else "test"] = [w1 - w for w1, w in zip(snaps[1][0], w0)]
    worst, name = worst_tensor(names, updates["test"], updates["cpu"])
    print(f"torch resnet50 one step (16 x 64x64): update relative L2 GPU vs CPU {rel_l2(updates['test'], updates['cpu']):.3e}"
          f" over all parameters; largest per tensor {worst:.3e} ({name})")

    torch.manual_seed(7)
    r20 = ResNet20()
    batches = learnable_batches(args.steps, 32, 32, 10, 7)
    runs = {}
    for device in ("cpu", args.device):
        m = ResNet20()
        m.load_state_dict(r20.state_dict())
        runs["cpu" if device == "cpu" and "cpu" not in runs else "test"] = train(m, device, batches, 0.05, 5e-4, 0.0)
    (lc, sc), (lg, sg) = runs["cpu"], runs["test"]
    worst = max(range(len(lc)), key=lambda i: abs(lg[i] - lc[i]))
    print(f"torch resnet20 {args.steps} steps (batch 32, 32x32): largest loss difference {abs(lg[worst] - lc[worst]):.4f} "
          f"at step {worst + 1} ({lg[worst]:.4f} vs {lc[worst]:.4f})")
    for step in sorted({1, 10, 30, args.steps}):
        if step in sc:
            print(f"  after step {step}: parameters relative L2 {rel_l2(sg[step][0], sc[step][0]):.3e}, "
                  f"batch-norm statistics {rel_l2(sg[step][1], sc[step][1]):.3e}")


if __name__ == "__main__":
    main()
