"""PyTorch side of the cross-checks: a CIFAR-style ResNet-20 with torchvision's naming, and the
h5py glue for scaletrain's dataset and checkpoint formats (docs/dataset-format.md,
docs/checkpoint-format.md)."""
import os
import subprocess

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

ST_BIN = os.environ.get("ST_BIN", "build/bin")
ST_TMP = os.environ.get("ST_TMP", "/tmp/scaletrain-test")
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet20(nn.Module):
    """He et al. 2016, CIFAR ResNet with n=3: 16/32/64 channels, projection shortcuts."""

    def __init__(self, in_channels=1, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = nn.Sequential(*[BasicBlock(16, 16, 1) for _ in range(3)])
        self.layer2 = nn.Sequential(BasicBlock(16, 32, 2), BasicBlock(32, 32, 1), BasicBlock(32, 32, 1))
        self.layer3 = nn.Sequential(BasicBlock(32, 64, 2), BasicBlock(64, 64, 1), BasicBlock(64, 64, 1))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class NeuMF(nn.Module):
    """NeuMF as the MLPerf v0.5 NCF reference's module (mlcommons/training, retired_benchmarks/ncf/
    neumf.py): same attribute names (hence state_dict names), forward and init. Checked against
    scaletrain's by test_torch_neumf.py; tools/torch_ncf_baseline.py trains it."""

    def __init__(self, nb_users, nb_items, mf_dim, mlp_layer_sizes):
        super().__init__()
        self.mf_user_embed = nn.Embedding(nb_users, mf_dim)
        self.mf_item_embed = nn.Embedding(nb_items, mf_dim)
        self.mlp_user_embed = nn.Embedding(nb_users, mlp_layer_sizes[0] // 2)
        self.mlp_item_embed = nn.Embedding(nb_items, mlp_layer_sizes[0] // 2)
        self.mlp = nn.ModuleList()
        for i in range(1, len(mlp_layer_sizes)):
            self.mlp.extend([nn.Linear(mlp_layer_sizes[i - 1], mlp_layer_sizes[i])])
        self.final = nn.Linear(mlp_layer_sizes[-1] + mf_dim, 1)
        for embed in (self.mf_user_embed, self.mf_item_embed, self.mlp_user_embed, self.mlp_item_embed):
            embed.weight.data.normal_(0.0, 0.01)
        for layer in self.mlp:  # glorot_uniform; biases keep nn.Linear's default
            limit = np.sqrt(6.0 / (layer.in_features + layer.out_features))
            layer.weight.data.uniform_(-limit, limit)
        limit = np.sqrt(3.0 / self.final.in_features)  # lecunn_uniform
        self.final.weight.data.uniform_(-limit, limit)

    def forward(self, user, item):
        xmf = self.mf_user_embed(user) * self.mf_item_embed(item)
        xmlp = torch.cat((self.mlp_user_embed(user), self.mlp_item_embed(item)), dim=1)
        for layer in self.mlp:
            xmlp = F.relu(layer(xmlp))
        return self.final(torch.cat((xmf, xmlp), dim=1))


def make_model(name, in_channels, num_classes):
    if name == "resnet20":
        return ResNet20(in_channels, num_classes)
    if name == "resnet50":
        m = torchvision.models.resnet50(num_classes=num_classes)
        if in_channels != 3:
            m.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
        return m
    raise ValueError(name)


def state_items(model):
    """state_dict entries scaletrain stores (it keeps no num_batches_tracked)."""
    return [(k, v) for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")]


def write_checkpoint(path, model_name, model, epoch=0, step=0):
    with h5py.File(path, "w") as f:
        f.attrs["scaletrain_checkpoint_format"] = 1
        f.attrs["model"] = model_name
        f.attrs["epoch"] = epoch
        f.attrs["step"] = step
        g = f.create_group("model")
        for k, v in state_items(model):
            g.create_dataset(k, data=v.detach().numpy().astype(np.float32))


def latest_checkpoint(run_dir):
    """The checkpoint a run directory's `latest` pointer names (docs/checkpoint-format.md)."""
    with open(os.path.join(run_dir, "checkpoints", "latest")) as f:
        return os.path.join(run_dir, "checkpoints", f.read().strip())


def read_checkpoint(path):
    """/model of a checkpoint file, or of a run directory's latest checkpoint."""
    if os.path.isdir(path):
        path = latest_checkpoint(path)
    with h5py.File(path, "r") as f:
        return {k: torch.from_numpy(np.array(v)) for k, v in f["model"].items()}


def write_dataset(root, images_by_split, labels_by_split, num_classes, mean, std, shards=1):
    """images: uint8 [N, H, W, C]; written with h5py exactly as docs/dataset-format.md says."""
    for split, images in images_by_split.items():
        labels = labels_by_split[split]
        d = os.path.join(root, split)
        os.makedirs(d, exist_ok=True)
        for s, idx in enumerate(np.array_split(np.arange(len(images)), shards)):
            with h5py.File(os.path.join(d, f"part-{s:03d}.h5"), "w") as f:
                f.attrs["scaletrain_format"] = 1
                f.attrs["task"] = "image_classification"
                f.attrs["num_classes"] = num_classes
                f.attrs["mean"] = np.asarray(mean, dtype=np.float32)
                f.attrs["std"] = np.asarray(std, dtype=np.float32)
                f.create_dataset("images", data=images[idx])
                f.create_dataset("labels", data=labels[idx].astype(np.int32))


def normalise(images, mean, std):
    """uint8 [N, H, W, C] -> float32 [N, C, H, W] as the trainer normalises."""
    x = images.astype(np.float32) / 255.0
    x = (x - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))


def run(cmd, np_ranks=None, check=True):
    if np_ranks:
        cmd = ["mpirun", "-np", str(np_ranks), "--oversubscribe"] + cmd
    r = subprocess.run(cmd, env=MPI_ENV, capture_output=True, text=True, timeout=600)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def compare(failures, what, got, want, atol, rtol):
    """Prints the worst |got - want| against atol + rtol * |want|; appends to failures when any
    element is off (or the shapes differ)."""
    got, want = torch.as_tensor(np.asarray(got)), torch.as_tensor(np.asarray(want))
    if got.shape != want.shape:
        failures.append(f"{what}: shape {tuple(got.shape)}, torch has {tuple(want.shape)}")
        return
    err = (got.double() - want.double()).abs()
    tol = atol + rtol * want.double().abs()
    bad = (err > tol).sum().item()
    worst = (err / tol).max().item() if tol.min() > 0 else (0.0 if bad == 0 else float("inf"))
    print(f"{what}: max |diff| {err.max().item():.3g}, worst/tolerance {worst:.3f}")
    if bad:
        failures.append(f"{what}: {bad} of {err.numel()} elements off")
