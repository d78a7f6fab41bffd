#!/usr/bin/env bash
# Gradient all-reduce in `scaletrain train` (issue 3): 4 ranks emulating 2 nodes. Hierarchical
# trains like flat (same losses within fp32 rounding of the sums); bucketed overlapped training
# gives the same weights bit for bit as all-reducing after backward; unequal nodes, bad
# --ranks-per-node and an unknown --allreduce fail clearly without a hang; the pre-flight
# reports busbw and --min-busbw aborts naming the measured value. The transports of issue 27:
# MPI at both levels on the CPU, in the report; NCCL on the CPU, --inter nccl with flat or without
# --intra nccl, and --cuda-aware-mpi on with Debian's MPI (not CUDA-aware) refused.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/train_allreduce
rm -rf "$T" && mkdir -p "$T"

"$BIN/scaletrain-data" synthetic --task image_classification --samples 128 --val-samples 16 --image-size 8,8,3 \
  --classes 4 --shards 2 --output "$T/data" >/dev/null
# 128 samples / 4 ranks / batch 8: 4 steps per epoch, 8 steps.
common=(--model resnet20 --data "$T/data" --epochs 2 --batch-size 8 --threads 1 --log-every 0 --eval-every 2)
train4() { timeout 120 mpirun -np 4 --oversubscribe "$BIN/scaletrain" train "${common[@]}" "$@"; }

train4 --output-dir "$T/flat" --ranks-per-node 2 --allreduce flat >"$T/flat.log"
train4 --output-dir "$T/hier" --ranks-per-node 2 --allreduce hierarchical --bucket-mb 0.05 --preflight \
  | tee "$T/hier.log"
train4 --output-dir "$T/hier_no_overlap" --ranks-per-node 2 --allreduce hierarchical --bucket-mb 0.05 --no-overlap \
  >"$T/hier_no_overlap.log"
grep -q "topology: 2 nodes x 2 ranks" "$T/hier.log" || fail "rank 0 does not show the topology"
grep -q "all-reduce: hierarchical, [0-9]* buckets" "$T/hier.log" || fail "rank 0 does not show the bucket layout"
grep -q "pre-flight: .* busbw [0-9.]* GB/s" "$T/hier.log" || fail "--preflight printed no busbw"

$PY - "$T" <<'PY'
import json, sys, h5py, numpy as np
T = sys.argv[1]
rep = {k: json.load(open(f"{T}/{k}/report.json")) for k in ["flat", "hier", "hier_no_overlap"]}
flat, hier, nov = rep["flat"], rep["hier"], rep["hier_no_overlap"]

# Hierarchical vs flat: the same per-epoch training loss within fp32 rounding of the sums.
for a, b in zip(flat["epochs"], hier["epochs"]):
    assert abs(a["train_loss"] - b["train_loss"]) <= 1e-5 * abs(a["train_loss"]), (a, b)

def weights(run):
    latest = open(f"{T}/{run}/checkpoints/latest").read().strip()
    with h5py.File(f"{T}/{run}/checkpoints/{latest}", "r") as f:
        return {k: np.array(f["model/" + k]) for k in f["model"]}
wf, wh, wn = weights("flat"), weights("hier"), weights("hier_no_overlap")
worst = max(float(np.abs(wf[k] - wh[k]).max()) for k in wf)
assert worst < 1e-4, f"hierarchical weights differ from flat by {worst}"
# Overlapped vs after-backward: the same all-reduces on the same data, so the same bits.
for k in wh:
    assert np.array_equal(wh[k], wn[k]), f"{k}: overlapped and --no-overlap weights differ"
print(f"hierarchical vs flat: max weight difference {worst:.3g}; overlap vs no-overlap: identical")

# The report: algorithm, topology, bucket layout, bytes, total and exposed all-reduce time, preflight.
assert hier["allreduce"] == "hierarchical" and flat["allreduce"] == "flat"
t = hier["topology"]
assert t["num_nodes"] == 2 and t["ranks_per_node"] == [2, 2] and t["uniform"] is True, t
b = hier["bucket_layout"]
assert b["overlap"] is True and nov["bucket_layout"]["overlap"] is False
assert b["buckets"] == len(b["list"]) > 10, b["buckets"]
assert sum(x["bytes"] for x in b["list"]) == b["bytes"] == hier["allreduce_bytes_per_step"] == 4 * hier["parameters"]
assert b["list"][0]["first_parameter"] == "fc.bias" and b["list"][-1]["last_parameter"] == "conv1.weight"
assert all(x["algorithm"] == "hierarchical" for x in b["list"])
assert flat["bucket_layout"]["buckets"] == 1  # 25 MiB holds all of resnet20
o = hier["allreduce_options"]
assert o["algorithm"] == "hierarchical" and o["compression"] == "none" and o["bucket_mb"] == 0.05
# The transports (issue 27): on the CPU both levels are MPI on host memory, and Debian's Open MPI
# says it is not CUDA-aware.
assert o["intra"] == "mpi" and o["inter"] == "mpi" and o["intra_requested"] == "auto" and o["nccl"] is None, o
ca = o["cuda_aware_mpi"]
assert ca["requested"] == "auto" and ca["used"] is False and ca["mpi_supported"] is False, ca
assert "MPIX_Query_cuda_support() = 0" in ca["mpi"], ca
assert hier["config"]["intra"] == "auto" and hier["config"]["inter"] == "mpi", hier["config"]
at = hier["allreduce_time"]
assert at["steps"] == hier["steps"] == 8 and at["measured_by"] == "host clock", at
for k in ["total_s", "per_step_s", "exposed_total_s", "exposed_per_step_s"]:
    s = at[k]
    assert 0 <= s["min"] <= s["mean"] <= s["max"] and s["slowest_rank"] in range(4), (k, s)
assert at["total_s"]["max"] > 0
assert abs(at["exposed_total_s"]["max"] - hier["phases"]["allreduce"]["max_s"]) < 1e-9
p = hier["preflight"]
assert p["bytes"] == 4 * hier["parameters"] and p["algorithm"] == "hierarchical" and p["iterations"] >= 3, p
assert p["time_us"] > 0 and p["algbw_gbps"] > 0 and abs(p["busbw_gbps"] - p["algbw_gbps"] * 2 * 3 / 4) < 1e-9 * p["busbw_gbps"]
assert flat["preflight"] is None
print("report ok")
PY

# Unequal nodes (3 + 1): hierarchical refuses on every rank; auto falls back to flat and trains.
expect_failure "hierarchical on unequal nodes" "needs the same number of ranks on every node" \
  mpirun -np 4 --oversubscribe "$BIN/scaletrain" train "${common[@]}" --output-dir "$T/o" --ranks-per-node 3 \
  --allreduce hierarchical
train4 --output-dir "$T/auto_unequal" --ranks-per-node 3 --allreduce auto >"$T/auto.log"
grep -q "unequal rank counts" "$T/auto.log" || fail "auto did not say it falls back to flat: $(cat "$T/auto.log")"
$PY -c "
import json, sys
r = json.load(open(sys.argv[1]))
assert r['topology']['ranks_per_node'] == [3, 1] and r['topology']['uniform'] is False, r['topology']
assert all(b['algorithm'] == 'flat' for b in r['bucket_layout']['list'])
assert len(r['epochs']) == 2 and r['epochs'][1]['train_loss'] > 0
" "$T/auto_unequal/report.json" || fail "auto on unequal nodes: bad report"
echo "ok: auto on unequal nodes falls back to flat"

# Bad options: a clear message naming the option, on every rank's exit, within seconds.
for bad in 0 -1 abc; do
  expect_failure "--ranks-per-node $bad" "--ranks-per-node" \
    mpirun -np 2 --oversubscribe "$BIN/scaletrain" train "${common[@]}" --output-dir "$T/o" --ranks-per-node "$bad"
done
expect_failure "SCALETRAIN_RANKS_PER_NODE=abc" "SCALETRAIN_RANKS_PER_NODE" \
  mpirun -np 2 --oversubscribe -x SCALETRAIN_RANKS_PER_NODE=abc "$BIN/scaletrain" train "${common[@]}" --output-dir "$T/o"
expect_failure "unknown --allreduce" "unknown --allreduce 'ring' (known: flat, hierarchical, auto)" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train "${common[@]}" --output-dir "$T/o" --allreduce ring
expect_failure "unknown --grad-compression" "unknown --grad-compression 'fp8'" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train "${common[@]}" --output-dir "$T/o" --grad-compression fp8
expect_failure "--bucket-mb 0" "--bucket-mb" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train "${common[@]}" --output-dir "$T/o" --bucket-mb 0
# The transports (issue 27): NCCL needs a GPU, and combinations that do not exist are named.
train2=(mpirun -np 2 --oversubscribe "$BIN/scaletrain" train "${common[@]}" --output-dir "$T/o")
expect_failure "--intra nccl on the CPU" "--intra nccl: NCCL all-reduces GPU memory, but this run computes on the CPU" \
  "${train2[@]}" --intra nccl
expect_failure "--device cpu --intra nccl" "on the CPU (device: cpu (--device cpu))" \
  "${train2[@]}" --device cpu --intra nccl
expect_failure "--inter nccl without --intra nccl" "--inter nccl needs --intra nccl" "${train2[@]}" --inter nccl
expect_failure "flat --inter nccl" "--allreduce flat --inter nccl: flat is one all-reduce over every rank" \
  "${train2[@]}" --allreduce flat --intra nccl --inter nccl
expect_failure "unknown --intra" "unknown --intra 'rdma' (known: auto, mpi, nccl)" "${train2[@]}" --intra rdma
expect_failure "--inter auto without --allreduce auto" "--inter auto leaves the transport across nodes to --allreduce auto" \
  "${train2[@]}" --inter auto
expect_failure "unknown --cuda-aware-mpi" "unknown --cuda-aware-mpi 'yes' (known: auto, on, off)" \
  "${train2[@]}" --cuda-aware-mpi yes
expect_failure "--cuda-aware-mpi on, MPI not CUDA-aware" \
  "--cuda-aware-mpi on: this MPI is not CUDA-aware (Open MPI: MPIX_Query_cuda_support() = 0" \
  "${train2[@]}" --cuda-aware-mpi on

# --min-busbw above what any fabric gives: every rank aborts, naming the measured value.
out=$(timeout 60 mpirun -np 2 --oversubscribe "$BIN/scaletrain" train "${common[@]}" --output-dir "$T/o" \
  --min-busbw 1e9 2>&1) && fail "--min-busbw 1e9 did not abort: $out"
measured=$(sed -n 's/^pre-flight: .* busbw \([0-9.]*\) GB\/s$/\1/p' <<<"$out")
[ -n "$measured" ] || fail "--min-busbw: no pre-flight line: $out"
grep -qF "all-reduce bus bandwidth $measured GB/s is below --min-busbw 1e+09 GB/s" <<<"$out" ||
  fail "--min-busbw: the error does not name the measured $measured GB/s: $out"
echo "ok: --min-busbw 1e9 aborts at a measured $measured GB/s"
echo "all-reduce training tests passed"
