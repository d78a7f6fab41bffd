#!/usr/bin/env bash
# bench_memory.sh BIN [BIN2]: ResNet-50 v1.5's peak tensor memory in training on the CPU
# (report.json's device.peak_in_use_bytes: every host tensor, 64-byte rounded, at the step's
# worst moment) at batches 8 and 16 in fp32 and amp-fp16 (224x224 synthetic images, 2 steps, one
# rank), for one build or two side by side; then what PyTorch saves for backward in the same
# forward (tools/torch_saved_activations.py). The figure a GPU run has in use, less cuDNN's
# workspaces: the CPU shows it without a GPU. Prints one line per run and the per-image slope.
#   tools/bench_memory.sh /tmp/before/build/bin build/bin
set -euo pipefail
bins=("$@")
[ ${#bins[@]} -ge 1 ] || { echo "usage: bench_memory.sh BIN [BIN2]" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d)}
PY=${PY:-/usr/bin/python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"${bins[0]}/scaletrain-data" synthetic --task image_classification --samples 64 --val-samples 16 \
  --image-size 224,224,3 --classes 1000 --shards 2 --output "$OUT/data" --overwrite >/dev/null
for bin in "${bins[@]}"; do
  for precision in fp32 amp-fp16; do
    for batch in 8 16; do
      "$bin/scaletrain" train --model resnet50 --data "$OUT/data" --output-dir "$OUT/run" --overwrite \
        --precision "$precision" --batch-size "$batch" --epochs 1 --max-steps 2 --no-augment --eval-every 0 \
        --log-every 1 >"$OUT/run.log" 2>&1 || { tail -20 "$OUT/run.log"; exit 1; }
      peak=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["device"]["peak_in_use_bytes"])' \
        "$OUT/run/report.json")
      echo "$bin $precision batch $batch: peak in use $((peak / 1000000)) MB"
      echo "$bin $precision $batch $peak" >>"$OUT/peaks.txt"
    done
  done
done
"$PY" - "$OUT/peaks.txt" <<'PY'
import sys
runs = {}
for line in open(sys.argv[1]):
    b, p, n, peak = line.split()
    runs.setdefault((b, p), {})[int(n)] = int(peak)
for (b, p), r in runs.items():
    slope = (r[16] - r[8]) / 8
    print(f"{b} {p}: {slope / 1e6:.1f} MB per image, {(r[8] - 8 * slope) / 1e6:.0f} MB besides")
PY
"$PY" tools/torch_saved_activations.py 8 16
