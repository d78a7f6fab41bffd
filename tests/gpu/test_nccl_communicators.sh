#!/usr/bin/env bash
# The NCCL communicators on one GPU (issue 27, sections 1, 4 and 7; src/comm/nccl/): what one GPU
# can run is every NCCL communicator of one rank, so each rank of an emulated node of one
# (--ranks-per-node 1) forms its node's communicator alone, as `hierarchical --intra nccl --inter
# mpi` will on such a machine, and a single rank forms the world's (`flat --intra nccl`):
#   1 rank, node and world; 2, 3 and 4 emulated nodes of one rank, node: each all-reduce of 1, 7,
#   1023 and 2^20 + 3 elements in fp32, fp16 and bf16 exact (scaletrain_gpu_nccl_check);
#   2 ranks in one node, or a world of 2, on the one GPU: refused on every rank before NCCL is
#   asked, naming the ranks that share the GPU, and no rank left waiting (each run has a limit).
# The multi-GPU combinations (communicators of several ranks, --inter nccl's cross-node one) need
# a GPU per rank: tests/gpu/test_multigpu_nccl.sh (label multigpu).
# Skips (77) without a GPU, or where this build has no NCCL.
source "$(dirname "$0")/lib.sh"
require_gpu
require_nccl "the NCCL communicators"
T=$TMP_ROOT/gpu_nccl_communicators
rm -rf "$T" && mkdir -p "$T"
status=0
nccl_check one_rank 1 --ranks-per-node 1 --needs node,world
nccl_check two_nodes_of_one 2 --ranks-per-node 1 --needs node
nccl_check three_nodes_of_one 3 --ranks-per-node 1 --needs node
nccl_check four_nodes_of_one 4 --ranks-per-node 1 --needs node
nccl_check two_ranks_one_node_refused 2 --ranks-per-node 2 --needs node --expect-refusal
nccl_check world_of_two_refused 2 --ranks-per-node 1 --needs world --expect-refusal
grep -q "ranks 0 and 1 share GPU " "$T/two_ranks_one_node_refused.log" ||
  { echo "FAIL: the refusal does not name ranks 0 and 1: $(cat "$T/two_ranks_one_node_refused.log")"; status=1; }
[ $status = 0 ] || fail "the NCCL communicators (above; logs in $T)"
echo "PASS"
