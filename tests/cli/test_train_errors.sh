#!/usr/bin/env bash
# Bad input to `scaletrain` (issue section 8): each case gives a clear message naming what is
# wrong and a non-zero exit on every rank within seconds, never a hang.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/train_errors
rm -rf "$T" && mkdir -p "$T"

"$BIN/scaletrain-data" synthetic --task image_classification --samples 64 --val-samples 16 --image-size 8,8,1 \
  --classes 4 --shards 2 --output "$T/gray" >/dev/null
"$BIN/scaletrain-data" synthetic --task image_classification --samples 64 --val-samples 16 --image-size 8,8,3 \
  --classes 4 --shards 2 --output "$T/rgb" >/dev/null
common=(--epochs 1 --batch-size 8 --threads 1 --log-every 0)

# Options and commands.
expect_failure "unknown model" "unknown model 'resnet51'" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet51 --data "$T/gray" --output-dir "$T/o"
expect_failure "unknown option" "unrecognised option '--bogus'" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --bogus --data "$T/gray"
expect_failure "unknown command" "unknown command 'trian'" "$BIN/scaletrain" trian
expect_failure "missing --data" "--data" "$BIN/scaletrain" train --model resnet20
expect_failure "bad number" "--batch-size" "$BIN/scaletrain" train --data "$T/gray" --batch-size many
expect_failure "missing config file" "--config $T/none.ini" "$BIN/scaletrain" train --config "$T/none.ini" --data x
printf 'model = resnet20\nbatch-sise = 8\n' >"$T/bad.ini"
expect_failure "unknown key in config" "$T/bad.ini" "$BIN/scaletrain" train --config "$T/bad.ini" --data "$T/gray"
# Adam's options, and the SGD options it has no use for.
expect_failure "adam beta1 of 1" "--adam-beta1 must be in [0, 1), got 1" \
  "$BIN/scaletrain" train --data "$T/gray" --optimizer adam --adam-beta1 1
expect_failure "negative adam beta2" "--adam-beta2 must be in [0, 1), got -0.5" \
  "$BIN/scaletrain" train --data "$T/gray" --optimizer adam --adam-beta2 -0.5
expect_failure "adam epsilon 0" "--adam-epsilon must be > 0, got 0" \
  "$BIN/scaletrain" train --data "$T/gray" --optimizer adam --adam-epsilon 0
expect_failure "adam with weight decay" "--weight-decay 0.01: --optimizer adam applies no weight decay" \
  "$BIN/scaletrain" train --data "$T/gray" --optimizer adam --weight-decay 0.01
expect_failure "adam with nesterov" "--nesterov is for --optimizer sgd; Adam has no Nesterov form" \
  "$BIN/scaletrain" train --data "$T/gray" --optimizer adam --nesterov
expect_failure "lazy_adam with weight decay" "--weight-decay 0.01: --optimizer lazy_adam applies no weight decay" \
  "$BIN/scaletrain" train --data "$T/gray" --optimizer lazy_adam --weight-decay 0.01
expect_failure "an unknown optimizer" "unknown --optimizer 'lazyadam' (known: sgd, lars, adam, lazy_adam)" \
  "$BIN/scaletrain" train --data "$T/gray" --optimizer lazyadam
expect_failure "an unknown --conv-algo" "unknown --conv-algo 'fastest' (known: heuristic, search, graph, graph-search)" \
  "$BIN/scaletrain" train --data "$T/gray" --conv-algo fastest
# The schedule's shape options belong to one schedule each; auxiliary heads to models that have them.
expect_failure "step epochs not numbers" "--lr-step-epochs '20,x': 'x' is not an epoch" \
  "$BIN/scaletrain" train --data "$T/gray" --lr-schedule step --lr-step-epochs 20,x
expect_failure "step interval with cosine" "are for --lr-schedule step, not cosine" \
  "$BIN/scaletrain" train --data "$T/gray" --lr-step-every 2
expect_failure "step epochs and interval" "not both" \
  "$BIN/scaletrain" train --data "$T/gray" --lr-schedule step --lr-step-every 2 --lr-step-epochs 3
expect_failure "poly power with step" "--lr-poly-power is for --lr-schedule poly, not step" \
  "$BIN/scaletrain" train --data "$T/gray" --lr-schedule step --lr-poly-power 0.5
expect_failure "aux weight without heads" "--aux-loss-weight 0.3: --model resnet20 has no auxiliary heads" \
  "$BIN/scaletrain" train --data "$T/gray" --model resnet20 --aux-loss-weight 0.3
expect_failure "negative aux weight" "--aux-loss-weight must be a finite value >= 0, got -1" \
  "$BIN/scaletrain" train --data "$T/gray" --aux-loss-weight -1
# Inception-v3's auxiliary head needs 299x299 images: refused before the first step, naming the
# option; with the head off the same small images train.
"$BIN/scaletrain-data" synthetic --task image_classification --samples 4 --val-samples 2 --image-size 75,75,3 \
  --classes 3 --output "$T/rgb75" >/dev/null
expect_failure "inception aux head on small images" \
  "--aux-loss-weight 0.4: the auxiliary head of inception_v3 needs images of at least 299x299, the input is 75x75" \
  "$BIN/scaletrain" train --model inception_v3 --data "$T/rgb75" --batch-size 2 --max-steps 1 --output-dir "$T/inc"
"$BIN/scaletrain" train --model inception_v3 --data "$T/rgb75" --batch-size 2 --max-steps 1 --aux-loss-weight 0 \
  --output-dir "$T/inc0" >"$T/inc0.log" 2>&1 || fail "inception_v3 at 75x75 without its head: $(tail -5 "$T/inc0.log")"
echo "ok: inception_v3 trains at 75x75 with --aux-loss-weight 0"
# --preprocess: a known mode, for image models, on 3-channel images.
expect_failure "unknown preprocess" "unknown --preprocess 'bogus' (known: torchvision, caffe)" \
  "$BIN/scaletrain" train --data "$T/rgb" --model resnet20 --preprocess bogus
expect_failure "preprocess for ncf" "--preprocess caffe is for image classification; --model ncf" \
  "$BIN/scaletrain" train --data "$T/rgb" --model ncf --preprocess caffe
expect_failure "caffe preprocess of gray images" "--preprocess caffe takes RGB images (3 channels)" \
  "$BIN/scaletrain" train --data "$T/gray" --model resnet20 --preprocess caffe --output-dir "$T/o" "${common[@]}"

# Data.
expect_failure "missing data dir" "$T/nowhere" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/nowhere" --output-dir "$T/o" "${common[@]}"
mkdir -p "$T/empty"
expect_failure "empty data dir" "$T/empty" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/empty" --output-dir "$T/o" "${common[@]}"
cp -r "$T/gray" "$T/truncated"
shard=$(ls "$T/truncated/train/"*.h5 | tail -1)
truncate -s 3000 "$shard"
expect_failure "truncated shard" "$(basename "$shard")" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/truncated" --output-dir "$T/o" "${common[@]}"
cp -r "$T/gray" "$T/badlabel"
shard=$(ls "$T/badlabel/train/"*.h5 | head -1)
$PY -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); l=f['labels']; l[3]=7; f.close()" "$shard"
expect_failure "label out of range" "$(basename "$shard")" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/badlabel" --output-dir "$T/o" "${common[@]}"
cp -r "$T/gray" "$T/nolabels"
shard=$(ls "$T/nolabels/val/"*.h5 | head -1)
$PY -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); del f['labels']; f.close()" "$shard"
expect_failure "missing dataset" "labels" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/nolabels" --output-dir "$T/o" "${common[@]}"
cp -r "$T/gray" "$T/floatlabels"
shard=$(ls "$T/floatlabels/train/"*.h5 | head -1)
$PY -c "
import h5py,sys,numpy as np
f=h5py.File(sys.argv[1],'r+'); l=np.array(f['labels']); del f['labels']
f.create_dataset('labels', data=l.astype(np.float32)); f.close()" "$shard"
expect_failure "wrong dtype" "labels" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/floatlabels" --output-dir "$T/o" "${common[@]}"

# --preprocess caffe trains (from a config file), is in report.json and the run identity: a resume
# without it is refused, naming it; eval takes it.
printf 'model = resnet20\npreprocess = caffe\n' >"$T/caffe.ini"
"$BIN/scaletrain" train --config "$T/caffe.ini" --data "$T/rgb" --output-dir "$T/caffe" --max-steps 2 "${common[@]}" \
  >/dev/null || fail "training with --preprocess caffe failed"
$PY -c "
import json,sys; r=json.load(open(sys.argv[1]))
assert r['config']['preprocess'] == 'caffe' and r['steps'] == 2, (r['config']['preprocess'], r['steps'])" \
  "$T/caffe/report.json" || fail "report.json of the caffe run"
expect_failure "resume without the run's --preprocess" '--preprocess is "caffe" in the checkpoint' \
  "$BIN/scaletrain" train --model resnet20 --data "$T/rgb" --output-dir "$T/caffe" --resume auto "${common[@]}"
"$BIN/scaletrain" eval --model resnet20 --checkpoint "$T/caffe" --data "$T/rgb" --preprocess caffe >/dev/null ||
  fail "eval with --preprocess caffe failed"

# Checkpoints: another model, another shape, a dataset that does not fit the model.
mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/gray" --output-dir "$T/r20" --max-steps 1 \
  "${common[@]}" >/dev/null
expect_failure "checkpoint for another model" "resnet20" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" eval --model resnet50 --checkpoint "$T/r20" --data "$T/gray"
expect_failure "dataset channels vs checkpoint" "channels" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" eval --model resnet20 --checkpoint "$T/r20" --data "$T/rgb"
expect_failure "init-from with wrong channels" "channels" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/rgb" --init-from "$T/r20" \
  --output-dir "$T/o" "${common[@]}"
cp "$T/r20/checkpoints/$(cat "$T/r20/checkpoints/latest")" "$T/reshaped.h5"
# Edited as a user converting weights would (format 1, no checksum), so that the shape is what fails.
$PY -c "
import h5py,sys,numpy as np
f=h5py.File(sys.argv[1],'r+'); w=np.array(f['model/layer1.0.conv1.weight']); del f['model/layer1.0.conv1.weight']
f.create_dataset('model/layer1.0.conv1.weight', data=w[:, :, :1, :1])
f.attrs['scaletrain_checkpoint_format'] = 1; del f.attrs['checksum_crc32']; f.close()" "$T/reshaped.h5"
# The edit breaks the file's seal (docs/checkpoint-format.md): h5unjam removes it, as a user would.
expect_failure "edited checkpoint, still sealed" "reshaped.h5 is damaged" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" eval --model resnet20 --checkpoint "$T/reshaped.h5" --data "$T/gray"
h5unjam -i "$T/reshaped.h5" -o "$T/reshaped-unsealed.h5" >/dev/null
expect_failure "checkpoint with a wrong shape" "layer1.0.conv1.weight" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" eval --model resnet20 --checkpoint "$T/reshaped-unsealed.h5" --data "$T/gray"
expect_failure "missing checkpoint" "$T/none.h5" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" eval --model resnet20 --checkpoint "$T/none.h5" --data "$T/gray"
# Numeric options are range-checked where they are parsed, before any arithmetic on them; a value
# from a --config file names the file and line.
# Memory that options ask for is checked before it is allocated: 65 batches of 2^20 samples of
# 64x64x3 bytes (plus a 4-byte label each) are 837.8 GB per rank, more than any node has.
"$BIN/scaletrain-data" synthetic --samples 8 --image-size 64,64,3 --classes 2 --shards 1 --output "$T/big" >/dev/null
expect_failure "batch buffers beyond the node's memory" \
  "the data loader's batch buffers (--prefetch 64 + 1 batches of 1048576 samples of 64x64x3 bytes): 837.8 GB per rank (1675.6 GB for the node's 2 ranks)" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/big" --batch-size 1048576 \
  --prefetch 64 --output-dir "$T/o-big"
# Checks that relate options after parsing name the config file and lines too.
printf 'model = resnet20\nstall-warn-s = 60\nstall-abort-s = 5\n' >"$T/related.ini"
expect_failure "related options from an INI file, with file and lines" \
  "--stall-abort-s 5 is shorter than --stall-warn-s 60 (0 = never abort); from $T/related.ini: --stall-abort-s line 3, --stall-warn-s line 2" \
  "$BIN/scaletrain" train --config "$T/related.ini" --data "$T/gray"
printf 'model = ResNet-50\n' >"$T/model.ini"
expect_failure "unknown model from an INI file" "unknown model 'ResNet-50' (--model; known: resnet20, resnet50, alexnet, googlenet, inception_v3, alexnet-caffe, googlenet-caffe, ncf, transformer, transformer-base, transformer-tiny); from $T/model.ini: --model line 1" \
  "$BIN/scaletrain" train --config "$T/model.ini" --data "$T/gray"
printf 'model = resnet20\n# the input pipeline\nprefetch = 2147483647\n' >"$T/overflow.ini"
expect_failure "INI value out of range, with file and line" \
  "--prefetch 2147483647 is out of range: allowed 1 to 64 batches ($T/overflow.ini line 3)" \
  "$BIN/scaletrain" train --config "$T/overflow.ini" --data "$T/gray"
out=$("$BIN/scaletrain" train --config "$T/overflow.ini" --data "$T/gray" --prefetch 0 2>&1) || true
grep -qF -- "--prefetch 0 is out of range: allowed 1 to 64 batches" <<<"$out" && ! grep -q "line 3" <<<"$out" ||
  fail "a command-line value that overrides the INI file is blamed on the file: $out"
expect_failure "huge warmup" "--warmup-epochs 1e+300 is out of range" \
  "$BIN/scaletrain" train --data "$T/gray" --warmup-epochs 1e300
expect_failure "too many threads" "--threads 4096 is out of range: allowed 0 to 1024" \
  "$BIN/scaletrain" train --data "$T/gray" --threads 4096
expect_failure "NaN learning rate" "--base-lr nan is out of range" "$BIN/scaletrain" train --data "$T/gray" --base-lr nan
printf 'epochs = 2\nbatch-size = many\n' >"$T/badvalue.ini"
expect_failure "INI value that is not a number" "--config $T/badvalue.ini line 2: the argument ('many')" \
  "$BIN/scaletrain" train --config "$T/badvalue.ini" --data "$T/gray"
printf 'epochs = 2\n\nbogus-option = 1\n' >"$T/unknown.ini"
expect_failure "INI unknown option" "--config $T/unknown.ini line 3: unrecognised option 'bogus-option'" \
  "$BIN/scaletrain" train --config "$T/unknown.ini" --data "$T/gray"
# The same ranges in the other commands.
expect_failure "eval batch of 0" "--batch-size 0 is out of range: allowed 1 to" \
  "$BIN/scaletrain" eval --model resnet20 --checkpoint "$T/none.h5" --data "$T/gray" --batch-size 0
expect_failure "dataset with 0 classes" "--classes 0 is out of range: allowed 1 to" \
  "$BIN/scaletrain-data" synthetic --samples 10 --image-size 8,8,3 --classes 0 --output "$T/zero-classes"
expect_failure "synthetic prototype cell of 0" "--prototype-cell 0 is out of range: allowed 1 to 65536 pixels" \
  "$BIN/scaletrain-data" synthetic --samples 10 --image-size 8,8,3 --classes 2 --prototype-cell 0 --output "$T/zero-cell"
echo "all error cases passed"
