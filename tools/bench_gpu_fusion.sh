#!/usr/bin/env bash
# bench_gpu_fusion.sh: does --fuse conv-bias-relu pay on a GPU (issue 26, section 3)? AlexNet
# (torchvision's: five convolutions with a bias and a ReLU each) trained on synthetic 224x224x3
# images, --no-augment, at BENCH_BATCH (default 256) in each of BENCH_PRECISIONS (default fp32 and
# amp-fp16), with --fuse none and --fuse conv-bias-relu interleaved (none, fused, none, fused:
# BENCH_ROUNDS rounds, default 2), BENCH_STEPS steps each (default 10) logged every BENCH_LOG_EVERY
# (default 5). Prints each run's images/s (the median of its progress lines after the first) and
# per precision the fused over unfused ratio of the medians. --fuse auto leaves the fusion off
# until this says it pays. BENCH_DEVICE=cpu BENCH_IMAGE=64,64,3 make a dry run without a GPU.
set -euo pipefail
BIN=${ST_BIN:-${BUNDLE:+$BUNDLE/bin}}
BIN=${BIN:-build/bin}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
batch=${BENCH_BATCH:-256}
steps=${BENCH_STEPS:-10}
log_every=${BENCH_LOG_EVERY:-5}
rounds=${BENCH_ROUNDS:-2}
precisions=${BENCH_PRECISIONS:-fp32,amp-fp16}
device=${BENCH_DEVICE:-cuda}
image=${BENCH_IMAGE:-224,224,3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
samples=$((batch * 4))
"$BIN/scaletrain-data" synthetic --task image_classification --samples "$samples" --val-samples 16 \
  --image-size "$image" --classes 1000 --shards 2 --output "$out/data" >/dev/null
: >"$out/rates.txt"
for precision in ${precisions//,/ }; do
  for round in $(seq 1 "$rounds"); do
    for fuse in none conv-bias-relu; do
      mpirun -np 1 --bind-to none "$BIN/scaletrain" train --device "$device" --model alexnet --data "$out/data" \
        --output-dir "$out/run" --overwrite --precision "$precision" --fuse "$fuse" --batch-size "$batch" \
        --epochs $(((steps * batch + samples - 1) / samples)) --max-steps "$steps" --base-lr 0.01 \
        --lr-schedule constant --warmup-epochs 0 --no-augment --data-threads 8 --eval-every 0 \
        --log-every "$log_every" >"$out/run.log" 2>&1 ||
        { tail -30 "$out/run.log"; echo "alexnet $precision --fuse $fuse: FAILED"; exit 1; }
      grep -q "device: $device" "$out/run.log" || { echo "alexnet: did not run on $device"; exit 1; }
      rate=$(python3 - "$out/run.log" <<'PY'
import re, statistics, sys
rates = [float(r) for r in re.findall(r"([0-9.]+) samples/s", open(sys.argv[1]).read())]
print(statistics.median(rates[1:]) if len(rates) > 1 else "nan")
PY
      )
      echo "alexnet batch $batch on $device, $precision, --fuse $fuse, round $round: $rate images/s"
      echo "$precision $fuse $rate" >>"$out/rates.txt"
      rm -rf "$out/run/checkpoints"
    done
  done
done
python3 - "$out/rates.txt" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    precision, fuse, rate = line.split()
    runs[(precision, fuse)].append(float(rate))
for precision in dict.fromkeys(p for p, _ in runs):
    none, fused = statistics.median(runs[(precision, "none")]), statistics.median(runs[(precision, "conv-bias-relu")])
    print(f"alexnet {precision}: --fuse conv-bias-relu {fused:.1f} against none {none:.1f} images/s: {fused / none:.3f}x")
PY
