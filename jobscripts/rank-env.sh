#!/usr/bin/env bash
# rank-env.sh: what each rank of a GPU job sets before scaletrain starts (jobscripts/train.sbatch
# runs `srun ... jobscripts/rank-env.sh scaletrain train ...`; issue 27, docs/gpu.md "Job scripts
# for GPU nodes"). srun starts every task with the same environment, but on a DGX-1 each pair of
# GPUs shares a PCIe switch with one of the node's 4 InfiniBand cards, so the card a rank should
# use depends on its GPU:
#   SCALETRAIN_HCA_MAP  the cards by local rank (= GPU index under --distribution=block:block and
#                       --gpu-bind=single:1), comma-separated; empty: nothing is set. Local rank i
#                       takes entry i: NCCL_IB_HCA=<card> for NCCL and UCX_NET_DEVICES=<card>:1 for
#                       an Open MPI over UCX, each only where the site has not set it already.
#   NCCL_DEBUG          set (by the site or the user) and NCCL_DEBUG_FILE not: NCCL's log goes to
#                       one file per rank, SCALETRAIN_NCCL_DEBUG_DIR/nccl-debug.<host>.<pid>.log
#                       (NCCL expands %h and %p), not into the job's output.
# Pinned host buffers land on the GPU's NUMA node without anything set here: srun binds each task
# to cores of its GPU's socket (--cpu-bind=cores with block:block), and the host allocates memory
# on the node of the core that first touches it.
#
#   rank-env.sh COMMAND [ARGS...]   sets the variables, then runs COMMAND in place of itself
#   rank-env.sh --print             prints "rank L: VAR=VALUE ..." (what it would set, and what the
#                                   site had set) for SLURM_LOCALID=L and exits (the dry run's)
set -uo pipefail
local_rank=${SLURM_LOCALID:-${OMPI_COMM_WORLD_LOCAL_RANK:-0}}
said=()  # what --print says

if [ -n "${SCALETRAIN_HCA_MAP:-}" ]; then
  IFS=',' read -r -a cards <<<"$SCALETRAIN_HCA_MAP"
  if [ "$local_rank" -ge "${#cards[@]}" ] || [ -z "${cards[$local_rank]}" ]; then
    echo "rank-env.sh: HCA_MAP '$SCALETRAIN_HCA_MAP' has ${#cards[@]} cards, none for local rank $local_rank" \
         "(one card per local rank, comma-separated; HCA_MAP=none leaves the choice to NCCL and the MPI)" >&2
    exit 2
  fi
  card=${cards[$local_rank]}
  if [ -n "${NCCL_IB_HCA:-}" ]; then
    said+=("NCCL_IB_HCA=$NCCL_IB_HCA (the site's)")
  else
    export NCCL_IB_HCA=$card
    said+=("NCCL_IB_HCA=$NCCL_IB_HCA")
  fi
  if [ -n "${UCX_NET_DEVICES:-}" ]; then
    said+=("UCX_NET_DEVICES=$UCX_NET_DEVICES (the site's)")
  else
    export UCX_NET_DEVICES=$card:1
    said+=("UCX_NET_DEVICES=$UCX_NET_DEVICES")
  fi
fi
if [ -n "${NCCL_DEBUG:-}" ]; then
  if [ -n "${NCCL_DEBUG_FILE:-}" ]; then
    said+=("NCCL_DEBUG_FILE=$NCCL_DEBUG_FILE (the site's)")
  else
    export NCCL_DEBUG_FILE=${SCALETRAIN_NCCL_DEBUG_DIR:-.}/nccl-debug.%h.%p.log
    said+=("NCCL_DEBUG_FILE=$NCCL_DEBUG_FILE")
  fi
fi

if [ "${1:-}" = --print ]; then
  echo "rank $local_rank: ${said[*]:-nothing set}"
  exit 0
fi
[ $# -gt 0 ] || { echo "usage: rank-env.sh COMMAND [ARGS...] | rank-env.sh --print" >&2; exit 2; }
exec "$@"
