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


class CaffeAlexNet(nn.Module):
    """bvlc_alexnet (BVLC/caffe models/bvlc_alexnet/train_val.prototxt) with the prototxt's layer
    names: LRN after conv1 and conv2, two groups in conv2, conv4 and conv5, Caffe's ceil pooling,
    dropout after fc6 and fc7. Takes 227x227."""

    def __init__(self, in_channels=3, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 96, 11, 4)
        self.conv2 = nn.Conv2d(96, 256, 5, 1, 2, groups=2)
        self.conv3 = nn.Conv2d(256, 384, 3, 1, 1)
        self.conv4 = nn.Conv2d(384, 384, 3, 1, 1, groups=2)
        self.conv5 = nn.Conv2d(384, 256, 3, 1, 1, groups=2)
        self.fc6 = nn.Linear(256 * 6 * 6, 4096)
        self.fc7 = nn.Linear(4096, 4096)
        self.fc8 = nn.Linear(4096, num_classes)
        self.norm = nn.LocalResponseNorm(5, 1e-4, 0.75, 1.0)
        self.drop6 = nn.Dropout(0.5)
        self.drop7 = nn.Dropout(0.5)

    def forward(self, x):
        pool = lambda t: F.max_pool2d(t, 3, 2, ceil_mode=True)  # noqa: E731
        x = pool(self.norm(F.relu(self.conv1(x))))
        x = pool(self.norm(F.relu(self.conv2(x))))
        x = F.relu(self.conv5(F.relu(self.conv4(F.relu(self.conv3(x))))))
        x = torch.flatten(pool(x), 1)
        x = self.drop6(F.relu(self.fc6(x)))
        x = self.drop7(F.relu(self.fc7(x)))
        return self.fc8(x)


class CaffeInception(nn.ModuleDict):
    """One inception_Nx block of bvlc_googlenet, keyed by the prototxt's names after the '/'
    (inception_3a/1x1 -> inception_3a.1x1), in the prototxt's order."""

    def __init__(self, cin, c1, c3r, c3, c5r, c5, pp):
        super().__init__({"1x1": nn.Conv2d(cin, c1, 1), "3x3_reduce": nn.Conv2d(cin, c3r, 1),
                          "3x3": nn.Conv2d(c3r, c3, 3, 1, 1), "5x5_reduce": nn.Conv2d(cin, c5r, 1),
                          "5x5": nn.Conv2d(c5r, c5, 5, 1, 2), "pool_proj": nn.Conv2d(cin, pp, 1)})
        self.out_channels = c1 + c3 + c5 + pp

    def forward(self, x):
        b1 = F.relu(self["1x1"](x))
        b2 = F.relu(self["3x3"](F.relu(self["3x3_reduce"](x))))
        b3 = F.relu(self["5x5"](F.relu(self["5x5_reduce"](x))))
        b4 = F.relu(self["pool_proj"](F.max_pool2d(x, 3, 1, 1, ceil_mode=True)))
        return torch.cat([b1, b2, b3, b4], 1)


class CaffeGoogLeNet(nn.Module):
    """bvlc_googlenet (BVLC/caffe models/bvlc_googlenet/train_val.prototxt) with its layer names,
    '/' written '.' (conv1/7x7_s2 -> conv1.7x7_s2): biases everywhere, LRN, no batch norm, real
    5x5 convolutions, the two loss heads (loss1 after inception_4a, loss2 after inception_4d) and
    loss3/classifier. Takes 224x224. In training it returns (logits, loss1, loss2)."""

    BLOCKS = [("inception_3a", 192, 64, 96, 128, 16, 32, 32), ("inception_3b", 256, 128, 128, 192, 32, 96, 64),
              ("inception_4a", 480, 192, 96, 208, 16, 48, 64), ("inception_4b", 512, 160, 112, 224, 24, 64, 64),
              ("inception_4c", 512, 128, 128, 256, 24, 64, 64), ("inception_4d", 512, 112, 144, 288, 32, 64, 64),
              ("inception_4e", 528, 256, 160, 320, 32, 128, 128), ("inception_5a", 832, 256, 160, 320, 32, 128, 128),
              ("inception_5b", 832, 384, 192, 384, 48, 128, 128)]

    def __init__(self, in_channels=3, num_classes=1000):
        super().__init__()
        self.conv1 = nn.ModuleDict({"7x7_s2": nn.Conv2d(in_channels, 64, 7, 2, 3)})
        self.conv2 = nn.ModuleDict({"3x3_reduce": nn.Conv2d(64, 64, 1), "3x3": nn.Conv2d(64, 192, 3, 1, 1)})
        for name, *channels in self.BLOCKS:
            block = CaffeInception(*channels)
            setattr(self, name, block)
            if name in ("inception_4a", "inception_4d"):
                loss = "loss1" if name == "inception_4a" else "loss2"
                setattr(self, loss, nn.ModuleDict({"conv": nn.Conv2d(block.out_channels, 128, 1),
                                                   "fc": nn.Linear(2048, 1024),
                                                   "classifier": nn.Linear(1024, num_classes)}))
        self.loss3 = nn.ModuleDict({"classifier": nn.Linear(1024, num_classes)})
        self.norm = nn.LocalResponseNorm(5, 1e-4, 0.75, 1.0)
        self.drop_fc = nn.ModuleList([nn.Dropout(0.7), nn.Dropout(0.7)])
        self.drop_7x7 = nn.Dropout(0.4)

    def head(self, loss, drop, x):
        x = F.avg_pool2d(x, 5, 3, ceil_mode=True)
        x = F.relu(loss["conv"](x))
        x = drop(F.relu(loss["fc"](torch.flatten(x, 1))))
        return loss["classifier"](x)

    def forward(self, x):
        pool = lambda t: F.max_pool2d(t, 3, 2, ceil_mode=True)  # noqa: E731
        x = self.norm(pool(F.relu(self.conv1["7x7_s2"](x))))
        x = F.relu(self.conv2["3x3"](F.relu(self.conv2["3x3_reduce"](x))))
        x = pool(self.norm(x))
        x = pool(self.inception_3b(self.inception_3a(x)))
        x = self.inception_4a(x)
        aux1 = self.head(self.loss1, self.drop_fc[0], x) if self.training else None
        x = self.inception_4d(self.inception_4c(self.inception_4b(x)))
        aux2 = self.head(self.loss2, self.drop_fc[1], x) if self.training else None
        x = pool(self.inception_4e(x))
        x = self.inception_5b(self.inception_5a(x))
        x = self.drop_7x7(torch.flatten(F.avg_pool2d(x, 7, 1), 1))
        logits = self.loss3["classifier"](x)
        return (logits, aux1, aux2) if self.training else logits


# ---- scaletrain's dropout masks (nn/dropout.hpp, ops/dropout.hpp), for the torch side -----------

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_LOW = np.uint64(0xFFFFFFFF)
_U64 = (1 << 64) - 1


def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 (Salmon et al. 2011, Random123) on arrays of counters: four uint32 words."""
    c = [np.asarray(v, dtype=np.uint64) & _LOW for v in (c0, c1, c2, c3)]
    k0, k1 = np.uint64(k0), np.uint64(k1)
    for r in range(10):
        if r:
            k0, k1 = (k0 + _W0) & _LOW, (k1 + _W1) & _LOW
        p0, p1 = _M0 * c[0], _M1 * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & _LOW, (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & _LOW]
    return [v.astype(np.uint32) for v in c]


def dropout_key(seed, layer):
    """splitmix64's output number layer + 1 from the state seed ^ "dropout.", split in two words."""
    z = ((seed ^ 0x64726F706F75742E) + (layer + 1) * 0x9E3779B97F4A7C15) & _U64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _U64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _U64
    z ^= z >> 31
    return z & 0xFFFFFFFF, z >> 32


def dropout_keep(numel, p, key, position):
    """The keep mask of `numel` elements: element i keeps when word i % 4 of the block i // 4 at
    (block, position) is below round((1 - p) * 2^32)."""
    blocks = np.arange((numel + 3) // 4, dtype=np.uint64)
    words = philox4x32_10(blocks & _LOW, blocks >> np.uint64(32), position & 0xFFFFFFFF, position >> 32, *key)
    threshold = min(round((1.0 - p) * 2.0**32), 2**32 - 1)
    return np.stack(words, axis=1).reshape(-1)[:numel] < threshold


class PhiloxDropout(nn.Module):
    """nn.Dropout(p) drawing scaletrain's masks: layer `layer` of a run seeded `seed`, at the
    position the owner sets (step, micro-batch, rank)."""

    def __init__(self, p, seed, layer):
        super().__init__()
        self.p, self.key, self.position = p, dropout_key(seed, layer), 0

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        keep = torch.from_numpy(dropout_keep(x.numel(), self.p, self.key, self.position)).reshape(x.shape)
        return x * keep.to(x.dtype) * np.float32(1.0 / (1.0 - self.p))


def install_philox_dropout(model, model_name, seed):
    """Replaces every nn.Dropout of the model, numbered in registration order (the order in which
    scaletrain's builders construct them), by PhiloxDropout; returns set_position(step,
    micro_batch, rank). Every dropout of these models acts on a tensor whose element order is the
    same in NCHW and scaletrain's channels-last layout (flattened features, or 1x1 maps)."""
    found = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Dropout)]
    layers = []
    for index, (name, m) in enumerate(found):
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        layer = PhiloxDropout(m.p, seed, index)
        parent._modules[attr] = layer
        layers.append(layer)

    def set_position(step, micro_batch, rank):
        for layer in layers:
            layer.position = (step << 32) | (micro_batch << 16) | rank
    return set_position


def make_model(name, in_channels, num_classes):
    if name == "resnet20":
        return ResNet20(in_channels, num_classes)
    if name in ("alexnet", "googlenet", "inception_v3"):
        if in_channels != 3:
            raise ValueError(f"{name}: the cross-checks use 3-channel images")
        return getattr(torchvision.models, name)(num_classes=num_classes)
    if name == "alexnet-caffe":
        return CaffeAlexNet(in_channels, num_classes)
    if name == "googlenet-caffe":
        return CaffeGoogLeNet(in_channels, num_classes)
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
