#!/usr/bin/env bash
# tools/bench_verify.sh [ROUNDS]: what the whole-file checks cost (docs/reliability.md).
#  1. The checksum rate: `scaletrain-data verify` (XXH3-64 of every shard, 1 and 2 ranks) on a
#     ~1 GB dataset, next to the raw read of the same files (`cat > /dev/null`) and Debian's
#     `xxhsum -H3`, all from the page cache (warm: the cost in CPU per GB; on a parallel file
#     system the read itself bounds it), in interleaved rounds; medians.
#  2. The checks at open: `scaletrain-data inspect` of a 1024-shard split with and without its
#     manifest (one stat per shard), and with --require-checksums (the manifest's presence, each
#     shard's superblock version, one small read per shard, and, the metadata being checksummed,
#     an HDF5 open of each shard for its string attributes' types; what train.sbatch and a study
#     pass by default, DATA_CHECKS=require).
# Env: BUILD (default build). Prints a table; writes nothing outside $TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
B=${BUILD:-build}/bin
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
W=$(mktemp -d "${TMPDIR:-/tmp}/bench_verify.XXXXXX")
trap 'rm -rf "$W"' EXIT

"$B/scaletrain-data" synthetic --samples 20000 --val-samples 16 --image-size 128,128,3 --classes 10 --shards 16 \
  --output "$W/big" >/dev/null
"$B/scaletrain-data" synthetic --samples 4096 --val-samples 16 --image-size 8,8,3 --classes 10 --shards 1024 \
  --output "$W/many" >/dev/null
bytes=$(cat "$W"/big/train/*.h5 | wc -c)
cat "$W"/big/*/*.h5 >/dev/null  # warm the page cache

t() { local s; s=$(date +%s.%N); "$@" >/dev/null 2>&1; awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN {print b - a}'; }
declare -A times inner
for r in $(seq "$ROUNDS"); do
  times[cat]+=" $(t sh -c "cat $W/big/train/*.h5 > /dev/null")"
  times[xxhsum]+=" $(t sh -c "xxhsum -H3 $W/big/train/*.h5")"
  mv "$W/big/val" "$W/val.aside"  # verify the train split only
  times[verify1]+=" $(t "$B/scaletrain-data" verify "$W/big")"
  times[verify2]+=" $(t mpirun -np 2 --oversubscribe "$B/scaletrain-data" verify "$W/big")"
  # verify's own account: the hashing alone, without process start-up and MPI_Init
  inner[verify1]+=" $("$B/scaletrain-data" verify "$W/big" | sed -n 's/.*MB in \([0-9.]*\) s.*/\1/p')"
  inner[verify2]+=" $(mpirun -np 2 --oversubscribe "$B/scaletrain-data" verify "$W/big" | sed -n 's/.*MB in \([0-9.]*\) s.*/\1/p')"
  mv "$W/val.aside" "$W/big/val"
  times[open_manifest]+=" $(t "$B/scaletrain-data" inspect "$W/many")"
  times[open_require]+=" $(t "$B/scaletrain-data" inspect --require-checksums "$W/many")"
  mv "$W/many/train/manifest.json" "$W/many/manifest.aside"
  times[open_plain]+=" $(t "$B/scaletrain-data" inspect "$W/many")"
  mv "$W/many/manifest.aside" "$W/many/train/manifest.json"
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
echo "train split of $W/big: 16 shards, $bytes bytes; medians of $ROUNDS interleaved rounds (warm page cache)"
printf "%-34s %10s %12s\n" "command" "seconds" "GB/s"
for k in cat xxhsum verify1 verify2; do
  m=$(echo "${times[$k]}" | median)
  printf "%-34s %10.3f %12.2f\n" "$k" "$m" "$(awk -v b="$bytes" -v m="$m" 'BEGIN {print b / m / 1e9}')"
done
for k in verify1 verify2; do
  m=$(echo "${inner[$k]}" | median)
  printf "%-34s %10.3f %12.2f\n" "$k (hashing, verify's own clock)" "$m" "$(awk -v b="$bytes" -v m="$m" 'BEGIN {print b / m / 1e9}')"
done
echo "inspect of a split of 1024 shards (times include process start-up, MPI init and HDF5 opens of every shard)"
for k in open_manifest open_require open_plain; do
  printf "%-34s %10.3f\n" "$k" "$(echo "${times[$k]}" | median)"
done
# --require-checksums' own cost: the median of each round's difference (rounds share the load)
diffs=$(paste <(echo "${times[open_require]}" | tr ' ' '\n' | grep .) <(echo "${times[open_manifest]}" | tr ' ' '\n' | grep .) |
  awk '{print $1 - $2}')
printf "%-34s %10.3f\n" "require - manifest (per round)" "$(echo $diffs | median)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "all rounds: $(for k in "${!times[@]}"; do echo "$k:${times[$k]};"; done) hashing: $(for k in "${!inner[@]}"; do echo "$k:${inner[$k]};"; done)"
