#!/usr/bin/env bash
# The ImageNet recipes of inputs/ (inputs/*_imagenet*.ini): each trains one step of 2 images on a
# small synthetic dataset, at a size its model takes, with only the batch, threads and the step
# count given on the command line (and Inception-v3's auxiliary head switched off, which its 75x75
# input needs). Checks that the trainer accepts every key of each file and that report.json's
# config holds each value as the file states it, and each recipe's hyperparameters against the
# source its comments cite (BVLC Caffe's solvers, the Inception-v3 paper, MLPerf). ncf_movielens.ini
# is cli.train_ncf's.
source "$(dirname "$0")/lib.sh"
SRC=${ST_SOURCE:-.}
T=$TMP_ROOT/input_configs
rm -rf "$T" && mkdir -p "$T"

# The smallest input each model takes here: the Caffe graphs have fixed inputs (227, 224).
for size in 32 64 75 224 227; do
  "$BIN/scaletrain-data" synthetic --samples 4 --val-samples 2 --image-size "$size,$size,3" --classes 4 --shards 1 \
    --output "$T/data$size" >/dev/null
done
declare -A data=([alexnet_imagenet]=64 [alexnet_caffe_imagenet]=227 [googlenet_imagenet]=32
                 [googlenet_caffe_imagenet]=224 [inception_v3_imagenet]=75 [resnet50_imagenet]=64
                 [resnet50_imagenet_lars]=64)
declare -A extra=([inception_v3_imagenet]="--aux-loss-weight 0")

files=$(cd "$SRC/inputs" && ls *_imagenet*.ini)
for file in $files; do
  name=${file%.ini}
  [ -n "${data[$name]:-}" ] || fail "inputs/$file: no dataset size for it in this test (add one)"
  # shellcheck disable=SC2086
  "$BIN/scaletrain" train --config "$SRC/inputs/$file" --data "$T/data${data[$name]}" --output-dir "$T/$name" \
    --batch-size 2 --max-steps 1 --threads 2 --data-threads 1 ${extra[$name]:-} >"$T/$name.log" 2>&1 ||
    fail "inputs/$file: $(tail -n 5 "$T/$name.log")"
  rm -rf "$T/$name/checkpoints"  # up to 0.5 GB (AlexNet) and not read here
  echo "ok: inputs/$file trains a step"
done

$PY - "$SRC/inputs" "$T" $files <<'EOF'
import json, os, sys
inputs, out, files = sys.argv[1], sys.argv[2], sys.argv[3:]
overridden = {"batch-size", "max-steps", "threads", "data-threads", "aux-loss-weight"}
# Keys whose report.json name is not the key with '-' as '_'.
renamed = {"shuffle": "shuffle_mode"}

def value(text):
    if "," in text:
        return [value(t) for t in text.split(",")]
    try:
        return float(text)
    except ValueError:
        return text

def ini(path):
    keys = {}
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            k, v = (s.strip() for s in line.split("=", 1))
            keys[k] = v
    return keys

recipes = {}
for f in files:
    keys = ini(os.path.join(inputs, f))
    first = open(os.path.join(inputs, f)).readline()
    assert first.startswith("# "), f"{f}: no comment saying what the recipe is and where it comes from"
    config = json.load(open(os.path.join(out, f[:-4], "report.json")))["config"]
    for k, v in keys.items():
        if k in overridden:
            continue
        got = config[renamed.get(k, k.replace("-", "_"))]
        want = value(v)
        assert got == want or (isinstance(got, (int, float)) and got == want), (f, k, got, want)
    recipes[f[:-4]] = (keys, config)
print(f"ok: report.json's config holds every key of {len(files)} files as written")

# The recipes against their sources (each file's comments cite them).
def check(name, **want):
    keys, config = recipes[name]
    for k, v in want.items():
        assert config[k] == v, (name, k, config[k], v)
    print(f"ok: {name}: " + ", ".join(f"{k} {v}" for k, v in want.items()))

caffe_alexnet = dict(base_lr=0.01, lr_schedule="step", lr_step_epochs=[20, 40, 60, 80], lr_step_gamma=0.1,
                     epochs=90, momentum=0.9, weight_decay=5e-4, warmup_epochs=0, label_smoothing=0)
check("alexnet_imagenet", model="alexnet", preprocess="torchvision", image_size=[224, 224], **caffe_alexnet)
check("alexnet_caffe_imagenet", model="alexnet-caffe", preprocess="caffe", image_size=[227, 227], **caffe_alexnet)
assert recipes["alexnet_imagenet"][0]["batch-size"] == "256", "bvlc_alexnet's batch_size is 256"
caffe_googlenet = dict(base_lr=0.01, lr_schedule="poly", lr_poly_power=0.5, end_lr=0, epochs=60, momentum=0.9,
                       weight_decay=2e-4, warmup_epochs=0, label_smoothing=0)
check("googlenet_imagenet", model="googlenet", preprocess="torchvision", **caffe_googlenet)
check("googlenet_caffe_imagenet", model="googlenet-caffe", preprocess="caffe", **caffe_googlenet)
for name in ("googlenet_imagenet", "googlenet_caffe_imagenet"):
    keys = recipes[name][0]
    assert (keys["batch-size"], keys["aux-loss-weight"]) == ("32", "0.3"), (name, "bvlc_googlenet: 32, loss_weight 0.3")
check("inception_v3_imagenet", model="inception_v3", base_lr=0.045, lr_schedule="step", lr_step_every=2,
      lr_step_gamma=0.94, epochs=100, momentum=0.9, label_smoothing=0.1, optimizer="sgd", image_size=[299, 299])
keys = recipes["inception_v3_imagenet"][0]
assert (keys["batch-size"], keys["aux-loss-weight"]) == ("32", "0.4"), keys
EOF
echo "PASS"
