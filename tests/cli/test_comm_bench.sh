#!/usr/bin/env bash
# scaletrain-comm-bench (issue 3, section 4): with 1, 2 and 4 ranks (4 emulating 2 nodes) the JSON
# has one entry per (algorithm, size), no wrong element, nccl-tests' algbw/busbw arithmetic and
# sizes that follow the step factor; --p2p prints an n x n matrix; bad options fail clearly, and
# --device cuda without a GPU too (its GPU runs are in tests/gpu/test_nccl_allreduce.sh).
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/comm_bench
rm -rf "$T" && mkdir -p "$T"
B=$BIN/scaletrain-comm-bench
quick=(--iters 3 --warmup 1)

# check_json FILE RANKS MIN MAX FACTOR ALGORITHMS: every claim of the tool's JSON, recomputed.
check_json() {
  $PY - "$@" <<'EOF'
import json, sys
path, n, lo, hi, factor, algos = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6].split(",")
rows = json.load(open(path))
assert isinstance(rows, list) and rows, "expected a non-empty JSON list"
sizes, s = [], lo
while s <= hi:
    whole = s // 4 * 4  # rounded down to whole floats; under 4 bytes skipped
    if whole and (not sizes or sizes[-1] != whole):
        sizes.append(whole)
    s *= factor
seen = {}
for r in rows:
    key = (r["algorithm"], r["bytes"])
    assert key not in seen, f"duplicate entry {key}"
    seen[key] = r
    assert r["wrong"] == 0, f"{key}: {r['wrong']} wrong elements"
    assert r["ranks"] == n, f"{key}: ranks {r['ranks']} != {n}"
    assert r["count"] * 4 == r["bytes"], f"{key}: count {r['count']}"
    t = r["time_us"] * 1e-6
    assert t > 0, f"{key}: time {r['time_us']}"
    algbw = r["bytes"] / t / 1e9
    assert abs(r["algbw_gbps"] - algbw) <= 1e-9 * algbw, f"{key}: algbw {r['algbw_gbps']} != bytes/time {algbw}"
    busbw = r["algbw_gbps"] * 2 * (n - 1) / n
    assert abs(r["busbw_gbps"] - busbw) <= 1e-9 * max(busbw, 1e-30), f"{key}: busbw {r['busbw_gbps']} != {busbw}"
expected = {(a, b) for a in algos for b in sizes}
assert set(seen) == expected, f"entries {sorted(set(seen) ^ expected)} missing or unexpected (sizes {sizes})"
print(f"ok: {path}: {len(rows)} entries, {len(sizes)} sizes x {algos}, 0 wrong")
EOF
}

echo "== help"
out=$("$B" --help)
for opt in --min-bytes --max-bytes --step-factor --algorithms --iters --warmup --ranks-per-node --grad-compression \
  --json --p2p --p2p-bytes --p2p-iters SCALETRAIN_RANKS_PER_NODE; do
  grep -qF -- "$opt" <<<"$out" || fail "--help does not mention $opt"
done

echo "== sweeps"
mpirun -np 1 "$B" --min-bytes 8 --max-bytes 64K --step-factor 4 "${quick[@]}" --json "$T/np1.json" >"$T/np1.txt"
check_json "$T/np1.json" 1 8 65536 4 flat,hierarchical,mpi
# Two emulated nodes of one rank; sizes 12, 36, 108, ... bytes: odd element counts.
mpirun -np 2 --oversubscribe "$B" --min-bytes 12 --max-bytes 200K --step-factor 3 --ranks-per-node 1 "${quick[@]}" \
  --json "$T/np2.json" >"$T/np2.txt"
check_json "$T/np2.json" 2 12 204800 3 flat,hierarchical,mpi
mpirun -np 4 --oversubscribe "$B" --min-bytes 8 --max-bytes 1M --ranks-per-node 2 "${quick[@]}" \
  --json "$T/np4.json" >"$T/np4.txt"
check_json "$T/np4.json" 4 8 1048576 2 flat,hierarchical,mpi
grep -q "2 nodes" "$T/np4.txt" || fail "no topology line with 2 nodes: $(head -3 "$T/np4.txt")"
grep -q "time.*algbw.*busbw.*#wrong" "$T/np4.txt" || fail "no table header: $(cat "$T/np4.txt")"
rows=$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$T/np4.txt")
[ "$rows" -eq 18 ] || fail "expected 18 table rows (8 B .. 1 MiB), got $rows: $(cat "$T/np4.txt")"
# Sizes that are not a multiple of 4 bytes round down to whole floats: 10, 30, 90 ... -> 8, 28, 88 ...
mpirun -np 4 --oversubscribe "$B" --min-bytes 10 --max-bytes 10000 --step-factor 3 --ranks-per-node 2 "${quick[@]}" \
  --algorithms hierarchical --grad-compression bf16 --json "$T/bf16.json" >/dev/null
check_json "$T/bf16.json" 4 10 10000 3 hierarchical,mpi
SCALETRAIN_RANKS_PER_NODE=2 mpirun -np 4 --oversubscribe -x SCALETRAIN_RANKS_PER_NODE "$B" --min-bytes 4 \
  --max-bytes 64K --step-factor 8 --grad-compression fp16 "${quick[@]}" --json "$T/fp16.json" >"$T/fp16.txt"
check_json "$T/fp16.json" 4 4 65536 8 flat,hierarchical,mpi
grep -q "2 nodes" "$T/fp16.txt" || fail "SCALETRAIN_RANKS_PER_NODE=2 ignored: $(head -3 "$T/fp16.txt")"

echo "== p2p matrix"
mpirun -np 4 --oversubscribe "$B" --p2p --p2p-bytes 1M --p2p-iters 2 --json "$T/p2p.json" >"$T/p2p.txt"
$PY - "$T/p2p.txt" "$T/p2p.json" <<'EOF'
import json, sys
lines = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
assert len(lines) == 4, f"expected 4 matrix rows, got {lines}"
for s, row in enumerate(lines):
    assert len(row) == 5 and int(row[0]) == s, f"row {s}: {row}"
    for d, v in enumerate(row[1:]):
        assert s == d or float(v) > 0, f"{s} -> {d}: {v} GB/s"
m = json.load(open(sys.argv[2]))["gbps"]
assert len(m) == 4 and all(len(r) == 4 for r in m) and all(m[s][d] > 0 for s in range(4) for d in range(4) if s != d), m
print("ok: 4 x 4 p2p matrix, positive off-diagonal")
EOF

echo "== errors"
expect_failure "min > max" "--min-bytes 1M is larger than --max-bytes 64K" \
  mpirun -np 2 --oversubscribe "$B" --min-bytes 1M --max-bytes 64K
expect_failure "negative size" "--min-bytes '-8' must not be negative" mpirun -np 2 --oversubscribe "$B" --min-bytes=-8
expect_failure "bad size" "--max-bytes '12Q' has an unknown unit" "$B" --max-bytes 12Q
expect_failure "unknown algorithm" "unknown algorithm 'ring'" \
  mpirun -np 2 --oversubscribe "$B" --algorithms flat,ring
expect_failure "negative --ranks-per-node" "--ranks-per-node -1 is out of range: allowed 1 to 100000 ranks" \
  mpirun -np 2 --oversubscribe "$B" --ranks-per-node=-1
expect_failure "unequal nodes" "needs the same number of ranks on every node" \
  mpirun -np 3 --oversubscribe "$B" --ranks-per-node 2 --max-bytes 1K
expect_failure "bad SCALETRAIN_RANKS_PER_NODE" "SCALETRAIN_RANKS_PER_NODE" \
  env SCALETRAIN_RANKS_PER_NODE=two mpirun -np 2 --oversubscribe -x SCALETRAIN_RANKS_PER_NODE "$B" --max-bytes 1K
expect_failure "unknown compression" "unknown --grad-compression 'fp8'" "$B" --grad-compression fp8
# --device (issue 27, section 5): no GPU here, so cuda is refused on every rank, naming the first
# rank and why; the GPU's algorithms need it; auto takes the CPU and says why.
expect_failure "--device cuda without a GPU" "scaletrain-comm-bench --device cuda: no GPU on rank 0" \
  mpirun -np 2 --oversubscribe "$B" --device cuda --max-bytes 1K
expect_failure "--p2p --device cuda without a GPU" "scaletrain-comm-bench --device cuda: no GPU on rank 0" \
  mpirun -np 2 --oversubscribe "$B" --device cuda --p2p --p2p-bytes 1K
expect_failure "a GPU algorithm on the CPU" "unknown algorithm 'nccl' in --algorithms 'nccl' on the CPU" \
  mpirun -np 2 --oversubscribe "$B" --algorithms nccl --max-bytes 1K
expect_failure "unknown --device" "--device tpu" "$B" --device tpu
out=$(mpirun -np 2 --oversubscribe "$B" --device auto --max-bytes 64 "${quick[@]}")
grep -q "^# device: cpu (--device auto: no GPU on rank 0" <<<"$out" || fail "--device auto did not say why the CPU: $out"
echo "ok: --device auto takes the CPU and says why"
expect_failure "step factor 1" "--step-factor 1 is out of range: allowed 2 to 1024" "$B" --step-factor 1
expect_failure "iterations out of range" "--iters 100000000 is out of range: allowed 1 to 10000000 iterations" \
  "$B" --iters 100000000
# Memory asked for is checked before it is allocated: 2 x 1 TiB per rank is more than any node has.
expect_failure "--max-bytes beyond memory" "--max-bytes 1024G (the buffer and scratch): 2199.0 GB per rank (4398.0 GB for the node's 2 ranks)" \
  mpirun -np 2 --oversubscribe "$B" --max-bytes 1024G
expect_failure "unwritable json" "cannot write --json $T/no/such/dir/x.json" \
  mpirun -np 2 --oversubscribe "$B" --max-bytes 1K --json "$T/no/such/dir/x.json"
echo "PASS"
