#!/usr/bin/env bash
# bench_transformer.sh: Transformer training tokens/s of scaletrain on one rank, beside PyTorch's
# nn.Transformer with the same sizes, tied embedding, batch and optimizer
# (tools/bench_torch_transformer.py; issue 25, section 6), on the CPU or one GPU.
#
# The data: synthetic copy pairs of one length (BENCH_LENGTH tokens a side, end of sentence
# included; default 32, about WMT's mean), over a vocabulary of BENCH_VOCAB subtokens (default
# 33,708, the size the Ding and catalog text gives and the reference's 33,708 for WMT). One length
# means one length bucket, so every step holds the same batch: batch_tokens / (the bucket's upper
# bound) pairs, which PyTorch then gets too. Tokens are target tokens, as both count them.
#
#   BENCH_DEVICE=cpu|cuda (default cpu)   BENCH_MODELS="transformer-tiny transformer-base"
#   BENCH_BATCH_TOKENS=4096               BENCH_STEPS=20 (a multiple of BENCH_LOG_EVERY=5)
#   BENCH_THREADS=2 (PyTorch's CPU threads; ours: oneDNN's default, the cores)
#   BENCH_TORCH_WARMUP=5 (PyTorch's untimed steps first)
#   BENCH_TORCH_MALLOC=keep|default (default keep: glibc keeps freed memory for reuse, below)
#
# PyTorch's CPU tensors come from malloc, and glibc hands blocks this large (the logits of a
# 33,708-subtoken vocabulary: 124 x 32 x 33,708 floats, 535 MB) to mmap and back at every free,
# so each step faults its memory in again: with Debian's torch 1.13 on 2 cores the tiny model
# ran at about 500 tokens/s that way and about 1,850 with `keep` (MALLOC_MMAP_MAX_=0 and a large
# trim threshold: freed memory stays in the heap). scaletrain keeps its own cache
# (core/caching_allocator.hpp); `keep` gives PyTorch the same, the fair baseline.
#
# The rate is the median of the progress lines after the first (the first holds the start-up's
# allocations); PyTorch's, of windows of BENCH_LOG_EVERY steps after BENCH_TORCH_WARMUP warm-up steps. Run in the
# repository root; in the GPU bundle $BUNDLE/bin holds the programs (gpu-check.sh's benches.sh).
set -euo pipefail
BIN=${ST_BIN:-${BUNDLE:+$BUNDLE/bin}}
BIN=${BIN:-build/bin}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
device=${BENCH_DEVICE:-cpu}
models=${BENCH_MODELS:-transformer-tiny transformer-base}
batch_tokens=${BENCH_BATCH_TOKENS:-4096}
steps=${BENCH_STEPS:-20}
log_every=${BENCH_LOG_EVERY:-5}
length=${BENCH_LENGTH:-32}
vocab=${BENCH_VOCAB:-33708}
threads=${BENCH_THREADS:-2}
torch_warmup=${BENCH_TORCH_WARMUP:-5}
case ${BENCH_TORCH_MALLOC:-keep} in
  keep) torch_env=(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736 MALLOC_TOP_PAD_=1073741824) ;;
  default) torch_env=() ;;
  *) echo "bench_transformer: BENCH_TORCH_MALLOC is keep or default, not '$BENCH_TORCH_MALLOC'"; exit 2 ;;
esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# length_bucket_bounds (src/data/translation_batches.cpp): 8, 9, ..., then 10% larger steps.
read -r pairs per_step <<<"$(python3 - "$length" "$batch_tokens" "$steps" <<'PY'
import sys
length, batch_tokens, steps = map(int, sys.argv[1:])
bound = 8
while bound <= length:
    bound += max(1, bound // 10)
per_step = batch_tokens // bound
print(per_step * (steps + 1), per_step)
PY
)"
[ "$per_step" -ge 1 ] || { echo "bench_transformer: BENCH_BATCH_TOKENS=$batch_tokens holds no pair of $length tokens"; exit 2; }
# The synthetic vocabulary holds the words, the reserved ids and the escape scheme's characters:
# ask for a few words fewer and give PyTorch the size the data says.
"$BIN/scaletrain-data" synthetic --task translation --kind copy --sentences "$pairs" --val-sentences 8 \
  --words $((vocab - 20)) --min-length $((length - 1)) --max-length $((length - 1)) --output "$out/data" >/dev/null
vocab=$("$BIN/scaletrain-data" inspect "$out/data" | sed -n 's/^ *vocabulary \([0-9]*\) subtokens.*/\1/p' | head -1)
[ -n "$vocab" ] || { echo "bench_transformer: no vocabulary size in scaletrain-data inspect's output"; exit 1; }

for model in $models; do
  mpirun -np 1 --bind-to none "$BIN/scaletrain" train --device "$device" --model "$model" --data "$out/data" \
    --output-dir "$out/run-$model" --overwrite --batch-tokens "$batch_tokens" --epochs 1 --max-steps "$steps" \
    --warmup-steps 0 --lr-schedule constant --base-lr 1e-4 --eval-every 0 --log-every "$log_every" \
    >"$out/run-$model.log" 2>&1 || { tail -30 "$out/run-$model.log"; echo "scaletrain $model: FAILED"; exit 1; }
  grep -q "device: $device" "$out/run-$model.log" || { echo "scaletrain $model: did not run on $device"; exit 1; }
  python3 - "$out/run-$model.log" "$model" "$device" "$log_every" "$per_step" "$length" <<'PY'
import re, statistics, sys
log, model, device, every, pairs, length = sys.argv[1:]
rates = [float(r) for r in re.findall(r"([0-9.]+) tokens/s", open(log).read())]
if len(rates) < 2:
    sys.exit(f"scaletrain {model}: too few progress lines ({len(rates)})")
print(f"scaletrain {model} on {device}: {statistics.median(rates[1:]):.1f} tokens/s (median of {len(rates) - 1} "
      f"windows of {every} steps after the first; {pairs} pairs of {length} tokens)")
PY
  env "${torch_env[@]}" python3 "$here/bench_torch_transformer.py" --model "$model" --sentences "$per_step" --length "$length" \
    --vocab "$vocab" --steps "$steps" --warmup "$torch_warmup" --window "$log_every" --device "$device" --threads "$threads"
  rm -rf "$out/run-$model/checkpoints"
done
