#!/usr/bin/env bash
# The Transformer (issue 25) on the GPU against the CPU: transformer-tiny, 3 Adam steps of token
# batches on a synthetic reverse task from the same weights and batches (dropout on: Philox masks
# by element index are the same on both devices), then the end-of-run evaluation, which translates
# the evaluation split on each device with beam search (beam 4, the default: the key/value cache's
# steps and its row gathers on the GPU). Every op the model brought is on the GPU here:
# layer norm, masked softmax (padding and causal), batched products (cuBLAS), the heads'
# transpose, the scaled embedding with its position signal, the token loss, Adam.
# (--warmup-steps 0: the model's default 16000 warmup steps would apply to the constant schedule too.)
# Checks: the parameters after the 3 steps within 1e-3 relative L2 (ten times gpu.ncf_training's
# bound: Adam's epsilon is 1e-9 here, so an element whose gradient is near 0 moves by up to the
# learning rate either way on float rounding; a wrong kernel moves every element, 1e-2 and more),
# the losses of the 3 steps within 1e-3, and both runs' BLEU
# equal within 1 point (beam search of nearly equal models). Skips (77) without a GPU.
source "$(dirname "$0")/lib.sh"
require_gpu
T=$TMP_ROOT/gpu_transformer_steps
rm -rf "$T" && mkdir -p "$T"
status=0

"$BIN/scaletrain-data" synthetic --task translation --kind reverse --sentences 600 --val-sentences 24 --words 20 \
  --max-length 10 --seed 7 --output "$T/data" >/dev/null || fail "scaletrain-data synthetic failed"
# ST_GPU_TEST_BEAM: the evaluation's beam (4, the default; cli.gpu_training_harness, which runs this
# CPU against CPU on 2 cores, sets 1: an untrained model's beams run to the length cap).
common=(--model transformer-tiny --data "$T/data" --epochs 1 --max-steps 3 --batch-tokens 512 --seed 11
  --lr-schedule constant --warmup-steps 0 --base-lr 1e-3 --log-every 1 --eval-every 1
  --beam-size "${ST_GPU_TEST_BEAM:-4}")
run_train gpu 1 "$DEV" "$TEST_ARGS" "${common[@]}"
run_train cpu 1 cpu "" "${common[@]}"
compare_checkpoints --what params --tolerance 1e-3 "$T/gpu" "$T/cpu" || status=1
compare_losses "$T/gpu.log" "$T/cpu.log" 1e-3 1e-3 || status=1
"$PY" - "$T/gpu/report.json" "$T/cpu/report.json" <<'PY' || status=1
import json, sys
a, b = (json.load(open(p))["final_val_accuracy"] for p in sys.argv[1:])
print(f"BLEU after 3 steps: {a:.3f} (GPU) vs {b:.3f} (CPU)")
if abs(a - b) > 1.0:
    sys.exit(f"FAIL: BLEU {a:.3f} on the GPU, {b:.3f} on the CPU")
PY
exit $status
