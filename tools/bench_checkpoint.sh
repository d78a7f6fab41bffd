#!/usr/bin/env bash
# ResNet-50 checkpoint write time (issue 9, section 8; recorded in docs/performance.md), against
# the disk's own fsync'd write rate measured in the same run, on the same file system.
# Each round, interleaved so that both see the same machine:
#   1. `scaletrain train --model resnet50` on 2 ranks, 2 steps, a checkpoint after each (32x32
#      inputs keep the steps short; the tensors are ResNet-50's with 1000 classes). Its log gives
#      each checkpoint's size and rank 0's time to write, fsync, publish and prune it.
#   2. dd of the same bytes (a checkpoint file kept from a warm-up run, in the page cache) to a
#      new file with conv=fsync: one sequential write, then fsync.
# The order of 1 and 2 alternates between rounds, with a sync and a pause between measurements:
# a virtual disk's write cache favours whichever write comes first after a quiet moment.
#   3. zlib's CRC-32 over a buffer of that size (the checksum's share of the write time).
# Prints every figure and the median over rounds. Usage: tools/bench_checkpoint.sh [ROUNDS]
# env: BIN=build/bin OUT=build/bench_checkpoint (OUT's file system is the one measured)
set -euo pipefail
ROUNDS=${1:-5}
BIN=${BIN:-build/bin} OUT=${OUT:-build/bench_checkpoint}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
rm -rf "$OUT" && mkdir -p "$OUT"

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(getconf _NPROCESSORS_ONLN) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs);" \
  "file system of $OUT: $(df -hT "$OUT" | awk 'NR==2 {print $2 ", " $3 " (" $5 " used)"}')"
"$BIN/scaletrain-data" synthetic --samples 64 --val-samples 16 --image-size 32,32,3 --classes 1000 --shards 2 \
  --output "$OUT/data" >/dev/null
train=(mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet50 --data "$OUT/data" --image-size 32,32
  --batch-size 4 --max-steps 2 --checkpoint-every-steps 1 --eval-every 0 --threads 1 --log-every 0)
echo "# checkpoint: ${train[*]} --output-dir $OUT/run_K"
echo "# disk:       dd if=$OUT/source.h5 of=$OUT/dd.bin bs=4M conv=fsync   (source: a warm-up run's checkpoint)"
"${train[@]}" --output-dir "$OUT/warmup" >/dev/null
cp "$(ls "$OUT/warmup/checkpoints/"step-*.h5 | tail -1)" "$OUT/source.h5"
rm -rf "$OUT/warmup"
measure_checkpoint() {
  "${train[@]}" --output-dir "$OUT/run_$1" >"$OUT/train_$1.log"
  grep "^checkpoint " "$OUT/train_$1.log" | sed "s/^/# round $1: /"
  rm -f "$OUT/run_$1/checkpoints/"step-*.h5
}
measure_disk() {
  dd if="$OUT/source.h5" of="$OUT/dd.bin" bs=4M conv=fsync 2>"$OUT/dd_$1.txt"
  rm -f "$OUT/dd.bin"
  echo "# round $1: dd: $(tail -1 "$OUT/dd_$1.txt")"
}
for k in $(seq 1 "$ROUNDS"); do
  if [ $((k % 2)) = 1 ]; then
    measure_checkpoint "$k"; sync; sleep 2; measure_disk "$k"
  else
    measure_disk "$k"; sync; sleep 2; measure_checkpoint "$k"
  fi
  sync
  sleep 2
done

/usr/bin/python3 - "$OUT" "$ROUNDS" <<'EOF'
import re, statistics, sys, time, zlib
out, rounds = sys.argv[1], int(sys.argv[2])
ck_mbs, ck_s, dd_mbs, ratios = [], [], [], []
for k in range(1, rounds + 1):
    lines = [l for l in open(f"{out}/train_{k}.log") if l.startswith("checkpoint ")]
    per = [re.search(r": ([0-9.]+) MB in ([0-9.]+) s", l).groups() for l in lines]
    mb = float(per[-1][0])
    seconds = statistics.median(float(s) for _, s in per)
    dd = open(f"{out}/dd_{k}.txt").read().splitlines()[-1]
    dd_bytes, dd_s = re.search(r"^(\d+) bytes .* copied, ([0-9.]+) s", dd).groups()
    dd_rate = int(dd_bytes) / 1e6 / float(dd_s)
    ck_s.append(seconds)
    ck_mbs.append(mb / seconds)
    dd_mbs.append(dd_rate)
    ratios.append(mb / seconds / dd_rate)
buf = bytes(int(mb * 1e6))
t = time.perf_counter()
zlib.crc32(buf)
crc_s = time.perf_counter() - t
med = statistics.median
print(f"checkpoint size            {mb:.1f} MB (ResNet-50: weights, batch-norm statistics, momentum, run state)")
print(f"checkpoint write           median {med(ck_s):.2f} s = {med(ck_mbs):.0f} MB/s   (rounds: "
      + ", ".join(f"{v:.0f}" for v in ck_mbs) + " MB/s)")
print(f"dd conv=fsync, same size   median {med(dd_mbs):.0f} MB/s   (rounds: " + ", ".join(f"{v:.0f}" for v in dd_mbs) + ")")
print(f"checkpoint / dd            median {med(ratios):.2f}   (per round: " + ", ".join(f"{v:.2f}" for v in ratios) + ")")
print(f"CRC-32 of {mb:.0f} MB (zlib)  {crc_s:.2f} s")
EOF
