#!/usr/bin/env bash
# The GPU training tests (tests/gpu/test_*.sh) checked on a machine without a GPU: with
# ST_GPU_TEST_DEVICE=cpu each runs its "GPU" side on the CPU, so (a) its comparisons must pass
# CPU against CPU, and (b) they must fail, naming the tensor or step and the error, when one side
# really differs (another seed, a learning rate 10% off). Without this a GPU test could pass
# vacuously (a comparison of a file with itself, a tolerance nothing exceeds) and nobody would know
# until a GPU machine ran it. Sizes are tiny (8x8 images, a few steps) to stay near a minute on 2
# busy cores; on a GPU the same scripts run at their full sizes.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/gpu_training_harness
rm -rf "$T" && mkdir -p "$T"
G=${ST_SOURCE:-.}/tests/gpu
export ST_TMP=$T ST_GPU_TEST_DEVICE=cpu ST_GPU_TEST_THREADS=1

# run_case NAME EXPECT_RC SCRIPT [VAR=VALUE...]: the script with the harness's environment plus
# VAR=VALUE, its output in $T/NAME.out; its exit status must be EXPECT_RC.
run_case() {
  local name=$1 expect=$2 script=$3 rc=0 start=$SECONDS
  shift 3
  env "$@" bash "$G/$script" >"$T/$name.out" 2>&1 || rc=$?
  [ "$rc" = "$expect" ] || fail "$name: $script exited $rc, expected $expect: $(tail -30 "$T/$name.out")"
  echo "ok: $name: $script exited $rc as expected ($((SECONDS - start)) s)"
}
expect_text() {  # NAME TEXT: the case's output contains TEXT
  grep -qF -- "$2" "$T/$1.out" || fail "$1: output lacks '$2': $(tail -30 "$T/$1.out")"
}

small=(ST_GPU_TEST_STEPS=4 ST_GPU_TEST_BATCH=8 ST_GPU_TEST_IMAGE=8,8,1)

# Without a GPU and without ST_GPU_TEST_DEVICE each script skips, as under ctest -L gpu.
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi >/dev/null 2>&1; then
  for s in "$G"/test_*.sh; do
    run_case "skip_$(basename "$s" .sh)" 77 "$(basename "$s")" ST_GPU_TEST_DEVICE=cuda
    expect_text "skip_$(basename "$s" .sh)" "SKIP: no GPU visible ("
  done
fi

# resnet20, 4 steps: the same run twice agrees; another seed (other initial weights) fails, and
# says which tensor and by how much.
run_case resnet20_same 0 test_resnet20_training.sh "${small[@]}"
expect_text resnet20_same "ok: params: relative L2 error"
expect_text resnet20_same "ok: loss curves agree"
run_case resnet20_seed 1 test_resnet20_training.sh "${small[@]}" ST_GPU_TEST_ARGS="--seed 2"
expect_text resnet20_seed "FAIL: params: relative L2 error"
expect_text resnet20_seed "largest in tensor model/"
expect_text resnet20_seed "FAIL: loss curves: step 1:"

# resnet50, one step on 32x32 images: the update agrees CPU against CPU; a learning rate 10% larger
# on one side is a 1e-1 update error, three times the tolerance.
r50=(ST_GPU_TEST_BATCH=4 ST_GPU_TEST_IMAGE=32,32,3)
run_case resnet50_same 0 test_resnet50_step.sh "${r50[@]}"
expect_text resnet50_same "ok: params: relative L2 error of the update"
run_case resnet50_lr 1 test_resnet50_step.sh "${r50[@]}" ST_GPU_TEST_ARGS="--base-lr 0.11"
expect_text resnet50_lr "FAIL: params: relative L2 error of the update"
expect_text resnet50_lr "largest in tensor model/"

# 2 ranks: the same 2-rank run agrees; another seed fails.
run_case shared_same 0 test_shared_gpu_allreduce.sh "${small[@]}"
expect_text shared_same "ok: buffers: relative L2 error"
run_case shared_seed 1 test_shared_gpu_allreduce.sh "${small[@]}" ST_GPU_TEST_ARGS="--seed 2"
expect_text shared_seed "largest in tensor model/"

# NCF, 6 steps: the same run twice agrees; another seed fails at step 1.
ncf=(ST_GPU_TEST_STEPS=6 ST_GPU_TEST_BATCH=256)
run_case ncf_same 0 test_ncf_training.sh "${ncf[@]}"
expect_text ncf_same "ok: HR@10 within 0.05"
expect_text ncf_same "ok: params: relative L2 error"
run_case ncf_seed 1 test_ncf_training.sh "${ncf[@]}" ST_GPU_TEST_ARGS="--seed 2"
expect_text ncf_seed "FAIL: loss curves: step 1:"

# Adam, LARS and accumulation, one step each: alike CPU against CPU; a rate 10% off on one side fails.
steps=(ST_GPU_TEST_BATCH=8 ST_GPU_TEST_IMAGE=8,8,1)
run_case optimizers_same 0 test_optimizer_steps.sh "${steps[@]}"
run_case optimizers_lr 1 test_optimizer_steps.sh "${steps[@]}" ST_GPU_TEST_ARGS="--base-lr 0.0011"
expect_text optimizers_lr "FAIL: params: relative L2 error of the update"

# The demo: without its data it skips and says where it looked; a run that cannot reach 92% (one
# short epoch on a tiny synthetic set) fails, naming the accuracy it reached.
# The CNNs' step (googlenet alone: Branches, auxiliary heads, dropout), and a learning rate 10% off.
run_case cnn_same 0 test_cnn_steps.sh ST_GPU_TEST_CNN_MODELS=googlenet
run_case cnn_lr 1 test_cnn_steps.sh ST_GPU_TEST_CNN_MODELS=googlenet ST_GPU_TEST_ARGS="--base-lr 0.011"
# The Transformer's steps and greedy evaluation; another seed (other initial weights) fails.
# Greedy evaluation here (beam search has its own tests: unit.transformer_decoding, torch.torch_beam_search).
run_case transformer_same 0 test_transformer_steps.sh ST_GPU_TEST_BEAM=1
run_case transformer_seed 1 test_transformer_steps.sh ST_GPU_TEST_BEAM=1 ST_GPU_TEST_ARGS="--seed 2"
# Loss scaling: the forced overflow skipped alike on both sides; another seed fails.
run_case loss_scale_same 0 test_loss_scale.sh "${small[@]}"
run_case loss_scale_seed 1 test_loss_scale.sh "${small[@]}" ST_GPU_TEST_ARGS="--seed 2"
# Mixed precision: amp-fp16 and amp-bf16 alike on both sides; a "GPU" side that runs fp32 under
# the test's amp flags (ST_GPU_TEST_ARGS replaces --precision) is no closer to the CPU's AMP than
# to its fp32 run (it is that run), and fails.
run_case amp_same 0 test_amp_training.sh "${small[@]}"
expect_text amp_same "amp-bf16: GPU from the CPU's amp-bf16 0.000e+00"
expect_text amp_same "ok: activations stored in float16"
run_case amp_fp32 1 test_amp_training.sh "${small[@]}" ST_GPU_TEST_ARGS="--precision fp32" ST_GPU_TEST_AMP_OTHERS=0
expect_text amp_fp32 "is not closer to the CPU's amp-fp16 than to its fp32"
expect_text amp_fp32 "does not say its precision"
run_case demo_no_data 77 test_demo.sh ST_GPU_TEST_FASHION_MNIST="$T/none"
expect_text demo_no_data "SKIP: no Fashion-MNIST files in $T/none"
"$BIN/scaletrain-data" synthetic --task image_classification --samples 256 --val-samples 32 --image-size 8,8,1 \
  --classes 4 --shards 2 --output "$T/demo_data" >/dev/null
run_case demo_short 1 test_demo.sh ST_GPU_TEST_DEMO_DATA="$T/demo_data" ST_GPU_TEST_ARGS="--epochs 1 --batch-size 16"
expect_text demo_short "FAIL: best top-1"
echo "PASS"
