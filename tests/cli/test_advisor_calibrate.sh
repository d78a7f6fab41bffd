#!/usr/bin/env bash
# scaletrain-advisor calibrate (docs/scaling-model.md): a short ResNet-20 sweep writes a calibration
# whose gradient size and bucket layout match PyTorch's parameters bucketed by DDP's rule, whose
# times grow with the batch and whose ready fractions are ordered; with --data it times the input
# pipeline and takes the split's sample count; NCF's sweep times the trainer's step with Adam on
# ml-20m's shape or on --data; transformer-tiny's in tokens (batches, rates, the epoch, predict's
# labels); a tiny sweep of each ImageNet CNN of issue 24
# at a small input; bad options fail before the sweep, naming the option and the value.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/advisor_calibrate
rm -rf "$T" && mkdir -p "$T"
A=$BIN/scaletrain-advisor
# Batches 4x apart at 32x32: enough work per step that the times grow clearly on a busy machine.
quick=(--model resnet20 --steps 3 --warmup-steps 1 --threads 1)

echo "== help"
out=$("$A" calibrate --help)
for opt in --model --batches 8,16,32 2,4,8 --steps --warmup-steps --threads --image-size --bucket-mb --data --io \
  --data-threads --prefetch --input-batches --output --device-name --verify-data --require-checksums; do
  grep -qF -- "$opt" <<<"$out" || fail "calibrate --help does not mention $opt"
done

# check_calibration FILE BATCHES BUCKET_MB TRAIN_SAMPLES INPUT(measured|none): every claim of the file
# recomputed. The expected layout: PyTorch's ResNet-20 parameters (tests/python/torch_reference.py,
# torchvision's order), walked from the last to the first into buckets of up to BUCKET_MB MiB, as
# PyTorch DDP fills them (docs/architecture.md, "Gradient buckets").
check_calibration() {
  $PY - "$ST_SOURCE/tests/python" "$@" <<'EOF'
import json, sys
ref, path, batches, bucket_mb, train_samples, input_kind = sys.argv[1:7]
c = json.load(open(path))
assert c["format"] == "scaletrain-calibration" and c["model"] == "resnet20", c
assert c["precision"] == "fp32" and c["device"].startswith("cpu (1 thread, "), c["device"]
assert "scaletrain-advisor calibrate on " in c["source"] and "--model resnet20" in c["source"], c["source"]
try:
    sys.path.insert(0, ref)
    import torch_reference
    sizes = [p.numel() * 4 for p in torch_reference.make_model("resnet20", 3, 10).parameters()]
except ImportError as e:  # no torch: the total from the count test_models checks against PyTorch
    print(f"note: {e}: bucket layout not compared with PyTorch's parameters")
    sizes = None
total = sum(sizes) if sizes else 4 * (272186 + 16 * 2 * 3 * 3)
assert c["gradient_bytes"] == total, (c["gradient_bytes"], total)
assert sum(b["bytes"] for b in c["buckets"]) == total
if sizes:
    capacity, expected, filled = float(bucket_mb) * 2**20, [], 0
    for s in reversed(sizes):
        if not expected or filled + s > capacity:
            expected.append(0)
            filled = 0
        expected[-1] += s
        filled += s
    got = [b["bytes"] for b in c["buckets"]]
    assert got == expected, f"bucket bytes {got} != {expected}"
f = [b["ready_fraction"] for b in c["buckets"]]
assert all(0 < x <= 1 for x in f) and f == sorted(f), f"ready fractions {f}"
assert f[-1] > 0.9, f"the last bucket is ready at {f[-1]} of backward"
pts = c["points"]
assert [p["batch"] for p in pts] == [int(b) for b in batches.split(",")], pts
for a, b in zip(pts, pts[1:]):
    assert b["forward_s"] + b["backward_s"] > a["forward_s"] + a["backward_s"], f"no growth from {a} to {b}"
for phase in "forward", "backward":
    assert c[phase]["per_sample_s"] > 0 and c[phase]["fixed_s"] >= 0, (phase, c[phase])
opt = sorted(p["optimizer_s"] for p in pts)
median = opt[len(opt) // 2] if len(opt) % 2 else (opt[len(opt) // 2 - 1] + opt[len(opt) // 2]) / 2
assert abs(c["optimizer_s"] - median) <= 1e-12 * median, (c["optimizer_s"], median)
assert c["bucket_mb"] == float(bucket_mb) and c["default_batch"] == 32, c
assert c["train_samples"] == int(train_samples), c["train_samples"]
if input_kind == "measured":
    assert c["input_samples_per_s"] > 0, c["input_samples_per_s"]
else:
    assert c["input_samples_per_s"] == 0, c["input_samples_per_s"]
print(f"ok: {path}: {len(pts)} points, {len(c['buckets'])} buckets, {c['gradient_bytes']} bytes")
EOF
}

echo "== sweep without data (one process, and as the one rank of mpirun)"
"$A" calibrate "${quick[@]}" --batches 8,2 --bucket-mb 0.1 --output "$T/r20.json" >"$T/r20.txt"
cat "$T/r20.txt"
check_calibration "$T/r20.json" 2,8 0.1 50000 none
grep -qF "CIFAR-10" "$T/r20.json" || fail "source does not say where train_samples comes from"
buckets=$($PY -c "import json, sys; print(len(json.load(open(sys.argv[1]))['buckets']))" "$T/r20.json")
grep -qF "in $buckets buckets of up to 0.1 MiB" "$T/r20.txt" || fail "the summary does not give the $buckets buckets: $(cat "$T/r20.txt")"
mpirun -np 1 "$A" calibrate "${quick[@]}" --batches 4,16 --output "$T/mpi.json" >/dev/null
check_calibration "$T/mpi.json" 4,16 25 50000 none

echo "== sweep with data"
"$BIN/scaletrain-data" synthetic --task image_classification --samples 96 --val-samples 16 --image-size 32,32,3 \
  --classes 10 --shards 2 --output "$T/rgb" >/dev/null
"$A" calibrate "${quick[@]}" --batches 2,8 --data "$T/rgb" --input-batches 5 --device-name "cpu (1 thread, test)" \
  --output "$T/data.json" >"$T/data.txt"
grep -qF '"device": "cpu (1 thread, test)"' "$T/data.json" || fail "--device-name not in the file"
check_calibration "$T/data.json" 2,8 25 96 measured
grep -qF -- "--data $T/rgb train split" "$T/data.json" || fail "source does not name --data"
grep -qF "samples/s (one rank)" "$T/data.txt" || fail "no input rate printed: $(cat "$T/data.txt")"

echo "== ncf: the trainer's step with the model's defaults (Adam), on ml-20m's shape and on --data"
# check_ncf FILE USERS ITEMS TRAIN_SAMPLES INPUT(measured|none): NeuMF's parameters as the MLPerf
# reference sizes them (GMF factor 64; MLP 256-256-128-64 from two 128-wide embeddings; the
# prediction layer over 64 + 64), all in the buckets; the batches as asked.
check_ncf() {
  $PY - "$@" <<'EOF'
import json, sys
path, users, items, train_samples, input_kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
c = json.load(open(path))
params = (users + items) * 64 + (users + items) * 128 + (256 * 256 + 256) + (256 * 128 + 128) + (128 * 64 + 64) + (128 + 1)
assert c["model"] == "ncf" and c["gradient_bytes"] == 4 * params, (c["gradient_bytes"], 4 * params)
assert sum(b["bytes"] for b in c["buckets"]) == c["gradient_bytes"], c["buckets"]
assert [p["batch"] for p in c["points"]] == [64, 4096], c["points"]
assert c["points"][1]["forward_s"] > c["points"][0]["forward_s"], c["points"]
assert c["default_batch"] == 1024 and c["train_samples"] == train_samples, c
assert (c["input_samples_per_s"] > 0) == (input_kind == "measured"), c["input_samples_per_s"]
print(f"ok: {path}: {params} parameters in {len(c['buckets'])} buckets")
EOF
}
# Batches 64x apart: at ml-20m's size backward writes the embedding tables' dense gradients (127 MB)
# whatever the batch, a fixed cost that 8x more samples did not clearly outgrow under the sanitizers.
ncf=(--model ncf --batches 4096,64 --steps 3 --warmup-steps 1 --threads 1)
"$A" calibrate "${ncf[@]}" --output "$T/ncf.json" >"$T/ncf.txt"
cat "$T/ncf.txt"
check_ncf "$T/ncf.json" 138493 26744 $((19861770 * 5)) none
grep -qF "calibrating ncf on 138493 users x 26744 items" "$T/ncf.txt" || fail "the start line does not give ml-20m's shape"
grep -qF "MovieLens-20M" "$T/ncf.json" || fail "source does not say where train_samples comes from"
"$BIN/scaletrain-data" synthetic --task recommendation --users 300 --items 300 --groups 5 --positives-per-user 20 \
  --eval-negatives 99 --output "$T/ncf-data" >/dev/null
"$A" calibrate "${ncf[@]}" --data "$T/ncf-data" --input-batches 5 --output "$T/ncf-data.json" >"$T/ncf-data.txt"
check_ncf "$T/ncf-data.json" 300 300 $((300 * 19 * 5)) measured
grep -qF "calibrating ncf on 300 users x 300 items" "$T/ncf-data.txt" || fail "the start line does not give --data's shape"

echo "== the ImageNet CNNs of issue 24: a tiny sweep each"
# Small inputs where the network takes them (AlexNet 64x64; GoogLeNet 32x32; Inception-v3 75x75,
# which needs its auxiliary head off), the Caffe graphs at their fixed 227x227 and 224x224. Batch
# norm in training needs two values per channel, and GoogLeNet's and Inception-v3's last blocks are
# 1x1 at these sizes: their batches start at 2. Batches 4x to 8x apart, so that the times grow on
# a busy machine. The parameter counts are `scaletrain info`'s at 1000 classes (torch.model_layout
# checks them against torchvision and the Caffe replicas); every parameter is in the buckets, the
# auxiliary heads' too (the trainer all-reduces them at --aux-loss-weight 0 as well).
check_cnn() {
  $PY - "$@" <<'EOF'
import json, sys
path, model, params, batches = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
c = json.load(open(path))
assert c["model"] == model and c["gradient_bytes"] == 4 * params, (model, c["gradient_bytes"], 4 * params)
assert sum(b["bytes"] for b in c["buckets"]) == c["gradient_bytes"], c["buckets"]
f = [b["ready_fraction"] for b in c["buckets"]]
assert all(0 < x <= 1 for x in f) and f == sorted(f) and f[-1] > 0.9, f
assert [p["batch"] for p in c["points"]] == [int(b) for b in batches.split(",")], c["points"]
assert c["train_samples"] == 1281167 and "ImageNet" in c["source"], (c["train_samples"], c["source"])
for phase in "forward", "backward":
    assert c[phase]["per_sample_s"] > 0, (phase, c[phase])
print(f"ok: {model}: {params} parameters in {len(c['buckets'])} buckets, batches {batches}")
EOF
}
cnn=(--steps 3 --warmup-steps 1 --threads 1)
"$A" calibrate --model alexnet "${cnn[@]}" --batches 1,8 --image-size 64,64 --output "$T/alexnet.json" >"$T/alexnet.txt"
check_cnn "$T/alexnet.json" alexnet 61100840 1,8
"$A" calibrate --model googlenet "${cnn[@]}" --batches 2,16 --image-size 32,32 --output "$T/googlenet.json" >"$T/googlenet.txt"
check_cnn "$T/googlenet.json" googlenet 13004888 2,16
"$A" calibrate --model inception_v3 "${cnn[@]}" --batches 2,8 --image-size 75,75 --aux-loss-weight 0 \
  --output "$T/inception.json" >"$T/inception.txt"
check_cnn "$T/inception.json" inception_v3 27161264 2,8
grep -qF "calibrating inception_v3 on 75x75x3 images" "$T/inception.txt" || fail "inception_v3: $(head -n 1 "$T/inception.txt")"
grep -qF -- "--aux-loss-weight 0" "$T/inception.json" || fail "the source does not give --aux-loss-weight 0"
"$A" calibrate --model alexnet-caffe "${cnn[@]}" --batches 1,4 --output "$T/alexnet-caffe.json" >"$T/alexnet-caffe.txt"
check_cnn "$T/alexnet-caffe.json" alexnet-caffe 60965224 1,4
grep -qF "calibrating alexnet-caffe on 227x227x3 images, 1000 classes" "$T/alexnet-caffe.txt" ||
  fail "alexnet-caffe is not at its 227x227: $(head -n 1 "$T/alexnet-caffe.txt")"
# googlenet-caffe at its 224x224 only (its pool5 is a fixed 7x7 window), batches 1 and 2: at the
# trainer's rate of 0.1 its loss was NaN by the fourth step of batch 2 (its default is now Caffe's 0.01).
"$A" calibrate --model googlenet-caffe "${cnn[@]}" --batches 1,2 --output "$T/googlenet-caffe.json" \
  >"$T/googlenet-caffe.txt"
check_cnn "$T/googlenet-caffe.json" googlenet-caffe 13378280 1,2

echo "== transformer-tiny: batches in tokens, on the WMT shape and on --data"
# check_translation FILE LOG BATCHES TRAIN_TOKENS INPUT(measured|none): batch_unit tokens, the points
# at the real target tokens of the whole 25-token pairs each batch holds, each point's tokens/s as
# the log prints it from the step times, the default batch --batch-tokens' (2048), train_samples
# in tokens.
check_translation() {
  $PY - "$@" <<'EOF'
import json, re, sys
path, log, batches, train_tokens, input_kind = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
c = json.load(open(path))
assert c["model"] == "transformer-tiny" and c["batch_unit"] == "tokens", (c["model"], c.get("batch_unit"))
assert [p["batch"] for p in c["points"]] == [int(b) // 25 * 25 for b in batches.split(",")], c["points"]
assert c["default_batch"] == 2048 and c["train_samples"] == train_tokens, (c["default_batch"], c["train_samples"])
assert sum(b["bytes"] for b in c["buckets"]) == c["gradient_bytes"] > 0, c["buckets"]
rows = {int(m.group(1)): float(m.group(2))
        for m in re.finditer(r"^ +(\d+) +[\d.]+ +[\d.]+ +[\d.]+ +([\d.]+)$", open(log).read(), re.M)}
for p in c["points"]:
    rate = p["batch"] / (p["forward_s"] + p["backward_s"] + p["optimizer_s"])
    assert abs(rows[p["batch"]] - rate) <= 0.05 + 1e-3 * rate, (p, rows, rate)
assert (c["input_samples_per_s"] > 0) == (input_kind == "measured"), c["input_samples_per_s"]
print(f"ok: {path}: points {[p['batch'] for p in c['points']]} tokens, {c['train_samples']} tokens an epoch")
EOF
}
tiny=(--model transformer-tiny --steps 2 --warmup-steps 1 --threads 1)
"$A" calibrate "${tiny[@]}" --batches 512,256 --output "$T/tiny.json" >"$T/tiny.txt"
cat "$T/tiny.txt"
check_translation "$T/tiny.json" "$T/tiny.txt" 256,512 $((4500000 * 31)) none
grep -qF "a vocabulary of 33708 subtokens, batches 512,256 tokens" "$T/tiny.txt" || fail "start line: $(head -n 1 "$T/tiny.txt")"
grep -qE "^ +batch .* tokens/s$" "$T/tiny.txt" || fail "the table does not count tokens/s"
grep -qF "WMT17 en-de" "$T/tiny.json" || fail "source does not say where train_samples comes from"
"$BIN/scaletrain-data" synthetic --task translation --kind reverse --sentences 600 --val-sentences 20 --words 20 \
  --max-length 10 --output "$T/reverse" >/dev/null
tokens=$($PY - "$T/reverse" <<'EOF'
import sys, h5py, glob
print(sum(int(h5py.File(f, "r")["target_offsets"][-1]) for f in sorted(glob.glob(sys.argv[1] + "/train/*.h5"))))
EOF
)
"$A" calibrate "${tiny[@]}" --batches 256,512 --data "$T/reverse" --input-batches 3 --output "$T/tiny-data.json" \
  >"$T/tiny-data.txt"
check_translation "$T/tiny-data.json" "$T/tiny-data.txt" 256,512 "$tokens" measured
grep -qE "input pipeline: [0-9.]+ tokens/s \(one rank\)" "$T/tiny-data.txt" || fail "input rate: $(cat "$T/tiny-data.txt")"
# The advisor reads the unit back and labels the throughput with it.
"$A" predict --calibration "$T/tiny.json" --gpus 1,2 --gpus-per-node 2 >"$T/tiny-predict.txt"
{ grep -qF "weak scaling: 2048 tokens per GPU" "$T/tiny-predict.txt" && grep -qE "^ +GPUs .* tokens/s " "$T/tiny-predict.txt"; } ||
  fail "predict does not count tokens: $(cat "$T/tiny-predict.txt")"

echo "== usage errors, before any sweep"
expect_failure "translation batch below one pair" "--batches: 24 tokens cannot hold one sentence pair" \
  "$A" calibrate --model transformer-tiny --batches 24,256 --output "$T/x.json"
expect_failure "translation batches of the same pairs" "--batches: 260 and 270 tokens both hold 10 pairs" \
  "$A" calibrate --model transformer-tiny --batches 260,270 --output "$T/x.json"
expect_failure "unknown model" "unknown model 'resnet51'" "$A" calibrate --model resnet51 --output "$T/x.json"
expect_failure "missing --model" "--model" "$A" calibrate --output "$T/x.json"
expect_failure "missing --output" "--output" "$A" calibrate --model resnet20
expect_failure "empty --batches" "--batches '' is empty" "$A" calibrate --model resnet20 --batches "" --output "$T/x.json"
expect_failure "zero batch" "--batches '8,0': batch size 0" "$A" calibrate --model resnet20 --batches 8,0 --output "$T/x.json"
expect_failure "negative batch" "--batches '-4': batch size -4" "$A" calibrate --model resnet20 --batches=-4 --output "$T/x.json"
expect_failure "empty item" "--batches '8,,16': '' is not a batch size" \
  "$A" calibrate --model resnet20 --batches 8,,16 --output "$T/x.json"
expect_failure "not a number" "--batches 'eight': 'eight'" "$A" calibrate --model resnet20 --batches eight --output "$T/x.json"
expect_failure "trailing comma" "--batches '8,': ends with a comma" "$A" calibrate --model resnet20 --batches 8, --output "$T/x.json"
expect_failure "batch twice" "batch size 8 is listed twice" "$A" calibrate --model resnet20 --batches 8,16,8 --output "$T/x.json"
expect_failure "zero steps" "--steps 0 is out of range" "$A" calibrate --model resnet20 --steps 0 --output "$T/x.json"
expect_failure "bad image size" "--image-size '16'" "$A" calibrate --model resnet20 --image-size 16 --output "$T/x.json"
expect_failure "output in a missing directory" "--output $T/nowhere/x.json: directory $T/nowhere does not exist" \
  "$A" calibrate --model resnet20 --output "$T/nowhere/x.json"
touch "$T/file"
expect_failure "output under a file" "--output $T/file/x.json: $T/file is not a directory" "$A" calibrate --model resnet20 --output "$T/file/x.json"
expect_failure "output is a directory" "--output $T is a directory" "$A" calibrate --model resnet20 --output "$T"
expect_failure "raw data at another size" "--image-size 16,16 differs from the 32x32 raw images of --data $T/rgb" \
  "$A" calibrate "${quick[@]}" --image-size 16,16 --data "$T/rgb" --output "$T/x.json"
expect_failure "negative aux loss weight" "--aux-loss-weight must be a finite value >= 0, got -1" \
  "$A" calibrate --model googlenet --aux-loss-weight=-1 --output "$T/x.json"
expect_failure "aux loss weight without heads" "--aux-loss-weight 0.3: --model alexnet has no auxiliary heads" \
  "$A" calibrate --model alexnet --aux-loss-weight 0.3 --output "$T/x.json"
expect_failure "ncf takes no images" "--image-size: --model ncf takes no images (its task is recommendation)" \
  "$A" calibrate --model ncf --image-size 16,16 --output "$T/x.json"
expect_failure "ncf on image data" "dataset $T/rgb is for the image classification task, but --model ncf is a recommendation model" \
  "$A" calibrate "${ncf[@]}" --data "$T/rgb" --output "$T/x.json"
expect_failure "resnet20 on ncf data" "dataset $T/ncf-data is for the recommendation task, but --model resnet20" \
  "$A" calibrate "${quick[@]}" --data "$T/ncf-data" --output "$T/x.json"
expect_failure "image size on ncf data" "dataset $T/ncf-data is for the recommendation task, but --model resnet20" \
  "$A" calibrate "${quick[@]}" --image-size 16,16 --data "$T/ncf-data" --output "$T/x.json"
# --verify-data and --require-checksums check --data as train's do, before libhdf5 reads it.
cp -r "$T/rgb" "$T/rgb-damaged"
shard=$(ls "$T/rgb-damaged/train/"*.h5 | head -1)
$PY -c "
import sys
f = open(sys.argv[1], 'r+b'); f.seek(0); f.write(bytes(8))" "$shard"
expect_failure "--verify-data on a damaged shard" "--verify-data: 1 damaged shard in $T/rgb-damaged/train" \
  "$A" calibrate "${quick[@]}" --data "$T/rgb-damaged" --verify-data --output "$T/x.json"
rm "$T/rgb-damaged/train/manifest.json"
expect_failure "--require-checksums without a manifest" "--require-checksums: $T/rgb-damaged/train has no manifest.json" \
  "$A" calibrate "${quick[@]}" --data "$T/rgb-damaged" --require-checksums --output "$T/x.json"
expect_failure "--verify-data without --data" "--verify-data checks the shards of --data, which is not given" \
  "$A" calibrate --model resnet20 --verify-data --output "$T/x.json"
expect_failure "unknown --io" "unknown --io 'nfs'" \
  "$A" calibrate --model resnet20 --data "$T/rgb" --io nfs --output "$T/x.json"
expect_failure "two ranks" "calibrate measures one rank; this job has 2" \
  mpirun -np 2 --oversubscribe "$A" calibrate "${quick[@]}" --output "$T/x.json"
[ ! -e "$T/x.json" ] || fail "a failed calibrate left $T/x.json"
echo "PASS"
