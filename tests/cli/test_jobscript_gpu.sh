#!/usr/bin/env bash
# jobscripts/train.sbatch's lines for a GPU job (issue 27, section 6; docs/gpu.md "Job scripts for
# GPU nodes"), from its own dry run (DRY_RUN=1, outside Slurm, SLURM_* set by hand: the emulated
# Slurm of the tests has no GPUs):
#  - each local rank of a DGX-1 node gets the InfiniBand card of its GPU's PCIe switch (GPUs 2k and
#    2k+1: mlx5_k) as NCCL_IB_HCA and UCX_NET_DEVICES; srun binds GPUs (single:1, block:block) and
#    starts each rank through jobscripts/rank-env.sh;
#  - a site's own NCCL_IB_HCA or UCX_NET_DEVICES is kept, never overwritten; HCA_MAP=none sets
#    none; a map with too few cards for the ranks of a node is exit 2 naming HCA_MAP and the rank,
#    before anything starts; NCCL_DEBUG's log goes to one file per rank in the run directory;
#  - a job without GPUs has no such lines and no wrapper;
# and rank-env.sh really sets them for the command it runs (a stand-in srun starting a stand-in
# scaletrain that prints its environment).
source "$(dirname "$0")/lib.sh"
SOURCE=${ST_SOURCE:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$TMP_ROOT/jobscript_gpu
rm -rf "$T" && mkdir -p "$T/fake-bin"
script=$SOURCE/jobscripts/train.sbatch

# dry NAME [VAR=VALUE...]: the dry run of an 8-GPU node with 8 tasks; output in $T/NAME.log, exit in $rc.
dry() {
  local name=$1
  shift
  rc=0
  env -u NCCL_IB_HCA -u UCX_NET_DEVICES -u NCCL_DEBUG -u NCCL_DEBUG_FILE -u HCA_MAP DRY_RUN=1 \
    SLURM_GPUS_ON_NODE=8 SLURM_NTASKS_PER_NODE="8(x4)" SLURM_NNODES=4 DATA=/data/imagenet OUTPUT_DIR="$T/run" \
    "$@" bash "$script" --epochs 2 >"$T/$name.log" 2>&1 || rc=$?
}
has() { grep -qF -- "$2" "$T/$1.log" || fail "$1: the output lacks '$2': $(cat "$T/$1.log")"; }
lacks() { ! grep -qF -- "$2" "$T/$1.log" || fail "$1: the output has '$2': $(cat "$T/$1.log")"; }

dry dgx1
[ "$rc" = 0 ] || fail "dgx1: exit $rc: $(cat "$T/dgx1.log")"
for k in 0 1 2 3; do
  for r in $((2 * k)) $((2 * k + 1)); do has dgx1 "rank $r: NCCL_IB_HCA=mlx5_$k UCX_NET_DEVICES=mlx5_$k:1"; done
done
has dgx1 "train.sbatch: dry run: srun --mpi=pmix --kill-on-bad-exit=1 --cpu-bind=cores --gpu-bind=single:1 --distribution=block:block bash $SOURCE/jobscripts/rank-env.sh "
has dgx1 " train --data /data/imagenet --output-dir $T/run "
has dgx1 " --device cuda --epochs 2"
echo "ok: a DGX-1 node's 8 ranks take their GPU pair's card, mlx5_0 to mlx5_3"

dry site NCCL_IB_HCA=mlx5_1 UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1
[ "$rc" = 0 ] || fail "site: exit $rc"
has site "rank 6: NCCL_IB_HCA=mlx5_1 (the site's) UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1 (the site's)"
lacks site "NCCL_IB_HCA=mlx5_3"
echo "ok: the site's NCCL_IB_HCA and UCX_NET_DEVICES are kept"

dry none HCA_MAP=none
[ "$rc" = 0 ] || fail "none: exit $rc"
has none "rank 7: nothing set"
lacks none "NCCL_IB_HCA"
echo "ok: HCA_MAP=none sets no card"

dry short HCA_MAP=mlx5_0,mlx5_1
[ "$rc" = 2 ] || fail "short: exit $rc, expected 2: $(cat "$T/short.log")"
has short "HCA_MAP 'mlx5_0,mlx5_1' has 2 cards, none for local rank 2"
lacks short "dry run: srun"
echo "ok: a map with 2 cards for 8 ranks is refused (exit 2), naming HCA_MAP and the rank"

dry debug NCCL_DEBUG=INFO
has debug "rank 0: NCCL_IB_HCA=mlx5_0 UCX_NET_DEVICES=mlx5_0:1 NCCL_DEBUG_FILE=$T/run/nccl-debug.%h.%p.log"
dry debug_site NCCL_DEBUG=INFO NCCL_DEBUG_FILE=/scratch/nccl.%h
has debug_site "NCCL_DEBUG_FILE=/scratch/nccl.%h (the site's)"
echo "ok: NCCL_DEBUG's log goes to one file per rank in the run directory unless the site says where"

rc=0
env -u NCCL_IB_HCA -u UCX_NET_DEVICES DRY_RUN=1 SLURM_GPUS_ON_NODE=0 SLURM_NTASKS_PER_NODE=2 DATA=/d \
  bash "$script" >"$T/cpu.log" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "cpu: exit $rc: $(cat "$T/cpu.log")"
lacks cpu "rank-env.sh"
lacks cpu "NCCL_IB_HCA"
has cpu "dry run: srun --mpi=pmix --kill-on-bad-exit=1 --cpu-bind=cores $SOURCE/build/bin/scaletrain train"
echo "ok: a job without GPUs runs scaletrain directly, no card set"

# Not a dry run: a stand-in srun runs the command as local rank 3, the stand-in scaletrain prints
# what it was given; rank-env.sh must have exported rank 3's card to it.
cat >"$T/fake-bin/srun" <<'S'
#!/bin/bash
while [[ "${1:-}" == --* ]]; do shift; done
SLURM_LOCALID=3 exec "$@"
S
cat >"$T/fake-bin/scaletrain" <<'S'
#!/bin/bash
echo "scaletrain saw NCCL_IB_HCA=${NCCL_IB_HCA:-unset} UCX_NET_DEVICES=${UCX_NET_DEVICES:-unset} args: $*"
S
chmod +x "$T/fake-bin/srun" "$T/fake-bin/scaletrain"
rc=0
env -u NCCL_IB_HCA -u UCX_NET_DEVICES -u HCA_MAP PATH="$T/fake-bin:$PATH" SLURM_GPUS_ON_NODE=8 SLURM_NTASKS_PER_NODE=8 \
  DATA=/d OUTPUT_DIR="$T/run" SCALETRAIN="$T/fake-bin/scaletrain" REQUEUE=0 bash "$script" --epochs 1 \
  >"$T/run.log" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "the stand-in job: exit $rc: $(cat "$T/run.log")"
has run "scaletrain saw NCCL_IB_HCA=mlx5_1 UCX_NET_DEVICES=mlx5_1:1 args: train --data /d"
echo "ok: rank-env.sh exports local rank 3's card (mlx5_1) to the scaletrain it starts"
echo "PASS"
