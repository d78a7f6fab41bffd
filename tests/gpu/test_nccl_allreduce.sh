#!/usr/bin/env bash
# The GPU gradient all-reduce with NCCL (--intra nccl; issue 27, sections 2, 4 and 7) on one GPU,
# where every NCCL communicator has one rank:
#   the reducer (scaletrain_gpu_nccl_check --reducer): flat and auto (calibrated; with --inter auto
#     too) on 1 rank,
#     hierarchical --inter mpi on
#     1 to 4 emulated nodes of one rank (3: an odd count), in fp32 and fp16/bf16 on the wire, two
#     steps each, every element the exact mean over ranks; and the pre-flight's all-reduce;
#   training: ResNet-20, 8 steps on 2 emulated nodes of one rank, hierarchical --intra nccl --inter
#     mpi against the host-staged --intra mpi; and 1 rank, flat --intra nccl against the default
#     (nothing reduced). The sums are the same fp32 additions in the same order (MPI across the
#     emulated nodes in both; a one-rank NCCL communicator copies), so the runs differ only where
#     cuDNN's algorithms do not repeat bit for bit: losses within 1e-4 relative, parameters and
#     batch-norm statistics within 1e-3 relative L2 (a bucket missed, summed twice or not divided
#     is off by tens of percent);
#   scaletrain-comm-bench --device cuda on 1 rank and 2 emulated nodes: exact sums, nccl left out
#     where two ranks would share the GPU in one communicator;
#   two ranks of one node on the one GPU with --intra nccl: refused on every rank, naming them,
#     before NCCL is asked, with no rank left waiting; and --intra auto there takes the host-staged
#     path with a warning.
# The multi-GPU combinations (node communicators of several ranks, --inter nccl) need a GPU per rank:
# tests/gpu/test_multigpu_nccl.sh (label multigpu) runs them where 2 or more GPUs are visible.
# Skips (77) without a GPU, or where this build has no NCCL.
source "$(dirname "$0")/lib.sh"
require_gpu
require_nccl "the NCCL all-reduce"
T=$TMP_ROOT/gpu_nccl_allreduce
rm -rf "$T" && mkdir -p "$T"
status=0

nccl_check reducer_flat_one_rank 1 --ranks-per-node 1 --reducer flat
nccl_check reducer_auto_one_rank 1 --ranks-per-node 1 --reducer auto
nccl_check reducer_auto_inter_auto_one_rank 1 --ranks-per-node 1 --reducer auto:nccl
for n in 1 2 3 4; do nccl_check "reducer_hierarchical_${n}x1" "$n" --ranks-per-node 1 --reducer hierarchical; done

# scaletrain-comm-bench --device cuda (section 5): one rank runs every GPU algorithm; two emulated
# nodes of one rank on the one GPU leave out nccl (a world of two on one GPU), saying why, and run
# hierarchical and staged, in fp32 and fp16; every sum exact (#wrong 0, exit 0).
bench() {
  local name=$1 np=$2 rc=0
  shift 2
  timeout 60 mpirun -np "$np" --oversubscribe --bind-to none "$BIN/scaletrain-comm-bench" --device cuda \
    --max-bytes 4M --step-factor 16 --iters 3 --warmup 1 --json "$T/$name.json" "$@" >"$T/$name.txt" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    echo "ok: comm-bench $name: $(grep 'average busbw' "$T/$name.txt")"
  else
    echo "FAIL: comm-bench $name (rc $rc): $(tail -5 "$T/$name.txt")"
    status=1
  fi
}
bench bench_one_rank 1 --algorithms nccl,hierarchical,hierarchical-nccl,staged
bench bench_two_nodes 2 --ranks-per-node 1
bench bench_two_nodes_fp16 2 --ranks-per-node 1 --grad-compression fp16
# --p2p on the GPU: one rank has no link but its GPU's own copy rate; two ranks on one GPU cannot
# form NCCL's world communicator, so the links are not measured, and it says why.
for np in 1 2; do
  timeout 60 mpirun -np $np --oversubscribe --bind-to none "$BIN/scaletrain-comm-bench" --device cuda --p2p \
    --p2p-bytes 16M --p2p-iters 3 --json "$T/p2p_$np.json" >"$T/p2p_$np.txt" 2>&1 ||
    { echo "FAIL: comm-bench --p2p --device cuda on $np rank(s): $(tail -5 "$T/p2p_$np.txt")"; status=1; }
done
grep -q "^# one rank: no links to measure" "$T/p2p_1.txt" || { echo "FAIL: p2p on one rank: $(cat "$T/p2p_1.txt")"; status=1; }
grep -q "^# GPU x GPU links not measured: .*ranks 0 and 1 share GPU" "$T/p2p_2.txt" ||
  { echo "FAIL: p2p on a shared GPU does not say why: $(cat "$T/p2p_2.txt")"; status=1; }
$PY - "$T" <<'PY' || status=1
import json, sys
for np in (1, 2):
    j = json.load(open(f"{sys.argv[1]}/p2p_{np}.json"))
    assert j["device"] == "cuda" and j["links_measured"] is (np == 1), j
    assert all(j["gbps"][r][r] > 1 for r in range(np)), j["gbps"]  # a GPU copies well above 1 GB/s
print("ok: comm-bench --p2p --device cuda: the diagonal measured, the links where NCCL can")
PY
grep -q "^# nccl: not run: ranks 0 and 1 share GPU" "$T/bench_two_nodes.txt" ||
  { echo "FAIL: comm-bench on a shared GPU does not say why nccl is left out"; status=1; }
$PY - "$T" <<'PY' || status=1
import json, sys
T = sys.argv[1]
for name, algos in [("bench_one_rank", {"nccl", "hierarchical", "hierarchical-nccl", "staged", "mpi"}),
                    ("bench_two_nodes", {"hierarchical", "staged", "mpi"}),
                    ("bench_two_nodes_fp16", {"hierarchical", "staged", "mpi"})]:
    rows = json.load(open(f"{T}/{name}.json"))
    assert {r["algorithm"] for r in rows} == algos, (name, {r["algorithm"] for r in rows})
    assert all(r["wrong"] == 0 for r in rows), name
print("ok: comm-bench --device cuda: the algorithms expected, every sum exact")
PY

synthetic_data "$T/data" 256 32 32,32,3 10
common=(--model resnet20 --data "$T/data" --epochs 1 --max-steps 8 --batch-size 16 --seed 5 --base-lr 0.05
  --lr-schedule constant --warmup-epochs 0 --momentum 0.9 --log-every 1 --eval-every 1 --bucket-mb 0.25
  --allreduce hierarchical)
# --cuda-aware-mpi off: the staged path whatever the MPI, so that the two runs sum alike.
run_train nccl 2 cuda "--ranks-per-node 1 --intra nccl --cuda-aware-mpi off" "${common[@]}"
run_train staged 2 cuda "--ranks-per-node 1 --intra mpi" "${common[@]}"
run_train flat_nccl 1 cuda "--allreduce flat --intra nccl" "${common[@]}"
run_train one_rank 1 cuda "--allreduce flat" "${common[@]}"
grep -q "all-reduce: hierarchical on the GPU: NCCL inside the node, MPI across nodes staged through pinned host" \
  "$T/nccl.log" || { echo "FAIL: the NCCL run does not say its path: $(grep 'all-reduce' "$T/nccl.log")"; status=1; }
$PY - "$T" <<'PY' || status=1
import json, sys
T = sys.argv[1]
for run, intra in [("nccl", "nccl"), ("staged", "mpi"), ("flat_nccl", "nccl")]:
    r = json.load(open(f"{T}/{run}/report.json"))
    o, t = r["allreduce_options"], r["allreduce_time"]
    assert o["intra"] == intra and o["inter"] == "mpi", (run, o)
    assert (o["nccl"] is not None) == (intra == "nccl"), (run, o)
    # The NCCL path times its all-reduce and the exposed part with CUDA events.
    assert t["measured_by"] == ("cuda events" if intra == "nccl" else "host clock"), (run, t)
    # (one rank's NCCL all-reduce may take no time at all: only the two-rank run must show some)
    assert 0 <= t["exposed_per_step_s"]["max"] and (run != "nccl" or t["per_step_s"]["max"] > 0), (run, t)
print("ok: report.json names the transports, NCCL's version and the clock of the all-reduce times")
PY
for pair in "nccl staged" "flat_nccl one_rank"; do
  set -- $pair
  compare_losses "$T/$1.log" "$T/$2.log" 1e-4 0 8 || status=1
  compare_checkpoints --what params --tolerance 1e-3 "$T/$1" "$T/$2" || status=1
  compare_checkpoints --what buffers --tolerance 1e-3 "$T/$1" "$T/$2" || status=1
done

# Two ranks of one node on the one GPU: --intra nccl refused on every rank; auto falls back.
out=$(timeout 60 mpirun -np 2 --oversubscribe --bind-to none "$BIN/scaletrain" train --device cuda "${common[@]}" \
  --ranks-per-node 2 --intra nccl --output-dir "$T/refused" 2>&1) &&
  { echo "FAIL: --intra nccl on a shared GPU ran"; status=1; }
grep -q "intra nccl: NCCL needs one GPU per rank .*ranks 0 and 1 share GPU" <<<"$out" ||
  { echo "FAIL: the refusal does not name ranks 0 and 1: $(head -5 <<<"$out")"; status=1; }
run_train shared_auto 2 cuda "--ranks-per-node 2 --max-steps 2" "${common[@]}"
grep -q "warning: all-reduce through host memory (--intra mpi), not NCCL: ranks 0 and 1 share GPU" \
  "$T/shared_auto.log" || { echo "FAIL: --intra auto on a shared GPU gave no warning"; status=1; }
[ $status = 0 ] || fail "the NCCL all-reduce (above; logs in $T)"
echo "PASS"
