"""`scaletrain info --json` against PyTorch: the state_dict entries (names, shapes and order, without
num_batches_tracked) and the parameter count of resnet50 (torchvision.models.resnet50) and resnet20
(the CIFAR ResNet-20 of He et al. 2016, written out below with torchvision's naming); of alexnet,
googlenet and inception_v3 (torchvision 0.14, auxiliary heads included) and of alexnet-caffe and
googlenet-caffe (the replicas of BVLC Caffe's prototxts in torch_reference.py); and the forward
multiply-adds per sample `info` reports, against an independent count from the PyTorch modules
(a forward hook on every Conv2d and Linear)."""
import json
import os
import subprocess
import sys

import torch
import torch.nn as nn
import torchvision

sys.path.insert(0, os.path.dirname(__file__))
from torch_reference import make_model  # noqa: E402

ST_BIN = os.environ.get("ST_BIN", "build/bin")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


class CifarResNet20(nn.Module):
    """Only the layout matters here, so there is no forward."""

    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        cin = 16
        for i, (cout, stride) in enumerate([(16, 1), (32, 2), (64, 2)]):
            setattr(self, f"layer{i + 1}", nn.Sequential(*[Block(cin if b == 0 else cout, cout, stride if b == 0 else 1)
                                                           for b in range(3)]))
            cin = cout
        self.fc = nn.Linear(64, num_classes)


def info(*args):
    cmd = [os.path.join(ST_BIN, "scaletrain"), "info", *args, "--json"]
    proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    text = proc.stdout
    start = text.find("{")
    if start < 0:
        sys.exit(f"FAIL: no JSON object in the output of {' '.join(cmd)}:\n{text}")
    obj, _ = json.JSONDecoder().raw_decode(text[start:])
    return obj


def expected_layout(module):
    params = sum(p.numel() for p in module.parameters())
    tensors = [(name, list(t.shape)) for name, t in module.state_dict().items()
               if not name.endswith("num_batches_tracked")]
    return params, tensors


def compare(label, got, module, input_shape):
    params, tensors = expected_layout(module)
    failures = []
    if got.get("parameters") != params:
        failures.append(f"parameters: {got.get('parameters')} != {params}")
    if input_shape is not None and got.get("input_shape") != input_shape:
        failures.append(f"input_shape: {got.get('input_shape')} != {input_shape}")
    ours = [(t["name"], list(t["shape"])) for t in got.get("tensors", [])]
    if ours != tensors:
        ours_d, theirs_d = dict(ours), dict(tensors)
        missing = [n for n, _ in tensors if n not in ours_d]
        extra = [n for n, _ in ours if n not in theirs_d]
        wrong = [f"{n}: {ours_d[n]} != {s}" for n, s in tensors if n in ours_d and ours_d[n] != s]
        failures.append(f"tensors differ: {len(ours)} vs {len(tensors)} entries; missing {missing[:5]}, "
                        f"extra {extra[:5]}, wrong shapes {wrong[:5]}")
        if not (missing or extra or wrong):
            first = next(i for i, (a, b) in enumerate(zip(ours, tensors)) if a != b)
            failures.append(f"order differs first at entry {first}: {ours[first][0]} vs {tensors[first][0]}")
    if failures:
        print(f"FAIL {label}:\n  " + "\n  ".join(failures))
        return False
    print(f"ok   {label}: {params} parameters, {len(tensors)} state_dict tensors")
    return True


def forward_macs(module, size):
    """Multiply-adds of every Conv2d and Linear in an evaluation forward of one size x size image."""
    total = [0]

    def hook(m, inputs, output):
        if isinstance(m, nn.Conv2d):
            total[0] += output.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]
        else:
            total[0] += output.numel() * m.in_features

    handles = [m.register_forward_hook(hook) for m in module.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    module.eval()
    with torch.no_grad():
        module(torch.zeros(1, 3, size, size))
    for h in handles:
        h.remove()
    return total[0]


def check_cnn(name, size, params, params_without_aux, macs):
    """The model's layout against PyTorch's, and its counts against the issue's and PyTorch's."""
    torch_model = make_model(name, 3, 1000)
    got = info("--model", name)
    ok = compare(name, got, torch_model, [3, size, size])
    expected = {"parameters": params, "parameters_without_aux_heads": params_without_aux,
                "forward_macs_per_sample": macs}
    counted = forward_macs(torch_model, size)
    if counted != macs:
        print(f"FAIL {name}: PyTorch counts {counted} multiply-adds at {size}x{size}, the issue's figure is {macs}")
        ok = False
    for key, want in expected.items():
        if got.get(key) != want:
            print(f"FAIL {name}: info's {key} is {got.get(key)}, expected {want}")
            ok = False
    return ok


def main():
    ok = True
    ok &= compare("resnet50", info("--model", "resnet50"), torchvision.models.resnet50(), None)
    ok &= compare("resnet50 (10 classes)", info("--model", "resnet50", "--num-classes", "10"),
                  torchvision.models.resnet50(num_classes=10), None)
    ok &= compare("resnet20", info("--model", "resnet20", "--num-classes", "10", "--input-shape", "1,28,28"),
                  CifarResNet20(1, 10), [1, 28, 28])
    ok &= compare("resnet20 (rgb, 100 classes)",
                  info("--model", "resnet20", "--num-classes", "100", "--input-shape", "3,32,32"),
                  CifarResNet20(3, 100), [3, 32, 32])
    # torchvision 0.14's own parameter counts (its weights' metadata) and multiply-adds (torchvision
    # 0.15's "GFLOPS": 0.714, 1.498, 5.713); the Caffe models' from their prototxts.
    ok &= check_cnn("alexnet", 224, 61100840, 61100840, 714188480)
    ok &= check_cnn("googlenet", 224, 13004888, 6624904, 1498376192)
    ok &= check_cnn("inception_v3", 299, 27161264, 23834568, 5713216096)
    ok &= check_cnn("alexnet-caffe", 227, 60965224, 60965224, 724406816)
    ok &= check_cnn("googlenet-caffe", 224, 13378280, 6998552, 1582671872)
    ok &= compare("googlenet (10 classes)", info("--model", "googlenet", "--num-classes", "10"),
                  torchvision.models.googlenet(num_classes=10, init_weights=False), None)
    r20 = expected_layout(CifarResNet20(1, 10))[0]
    if r20 != 272186 or expected_layout(torchvision.models.resnet50())[0] != 25557032:
        print("FAIL: the PyTorch reference models do not have the issue's parameter counts")
        ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
