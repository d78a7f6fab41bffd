#!/usr/bin/env bash
# The GPU's caching allocator (core/caching_allocator.hpp: large blocks split and merged) behind
# the CPU's tensors (SCALETRAIN_HOST_CACHE=1): training gives the same checkpoint, bit for bit, as
# with malloc's memory, in fp32 and amp-fp16 (a block handed out twice, or a split that overlapped
# a live tensor, would change the numbers); and report.json's device then gives the allocator's
# figures: what it held at most at least what was in use, and within 1.3 times it (exact-size
# blocks held up to 1.29 times: docs/performance.md, "What the allocator holds"), and no underlying
# allocation after the first step (the split and merged blocks settle at once).
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/allocator_on_host
rm -rf "$T" && mkdir -p "$T"
CK=("$PY" "$(dirname "$0")/checkpoints.py")
"$BIN/scaletrain-data" synthetic --samples 192 --val-samples 32 --image-size 32,32,3 --classes 5 --shards 2 \
  --output "$T/images" >/dev/null
RUN=(timeout 300 "$BIN/scaletrain" train --model resnet20 --data "$T/images" --batch-size 24 --threads 1 --epochs 2
  --max-steps 10 --log-every 1 --eval-every 0)
for precision in fp32 amp-fp16; do
  "${RUN[@]}" --precision $precision --output-dir "$T/malloc-$precision" >"$T/malloc-$precision.log"
  SCALETRAIN_HOST_CACHE=1 "${RUN[@]}" --precision $precision --output-dir "$T/cache-$precision" \
    >"$T/cache-$precision.log"
  "${CK[@]}" same "$T/malloc-$precision" "$T/cache-$precision"
  $PY - "$T/malloc-$precision/report.json" "$T/cache-$precision/report.json" <<'PY'
import json, sys
m, c = (json.load(open(p))["device"] for p in sys.argv[1:3])
# malloc: in use and held are one figure; the cache: sizes rounded (512 B, 2 MiB), and held >= in use.
assert m["peak_memory_bytes"] == m["peak_in_use_bytes"], m
assert c["peak_in_use_bytes"] >= m["peak_in_use_bytes"], (c, m)
assert c["peak_in_use_bytes"] <= c["peak_memory_bytes"] <= 1.3 * c["peak_in_use_bytes"], c
assert c["allocations_after_first_step"] == 0 and "allocations_after_first_step" not in m, (c, m)
print(f"in use {c['peak_in_use_bytes'] / 2**20:.1f} MiB, held {c['peak_memory_bytes'] / 2**20:.1f} MiB "
      f"(malloc: {m['peak_in_use_bytes'] / 2**20:.1f} MiB)")
PY
  echo "ok: $precision"
done
echo "PASS"
