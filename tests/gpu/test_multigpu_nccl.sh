#!/usr/bin/env bash
# The NCCL paths that need a GPU per rank (issue 27, sections 4 and 7; label multigpu): NCCL refuses
# two ranks of one communicator on one GPU, so these run only where 2 or more GPUs are visible and
# skip (77) elsewhere, saying so. Two ranks, rank r on GPU r:
#   the communicators: a node of two (node and world), two nodes of one with the cross-node one;
#   comm-bench --p2p --device cuda: both links measured (above 1 GB/s) and a verdict printed;
#   the reducer's exact means: hierarchical on a node of two (NCCL's reduce-scatter and all-gather
#     of two ranks, the odd tail), flat over two, --inter nccl on two nodes of one, auto;
#   training: ResNet-20 for 8 steps on a node of two, hierarchical --intra nccl against the
#     host-staged --intra mpi, and --inter nccl on two nodes of one against it: NCCL adds in its
#     own order, so losses within 1e-3 relative and parameters and statistics within 1e-2 relative
#     L2 (a bucket missed or summed twice is off by tens of percent).
source "$(dirname "$0")/lib.sh"
require_gpu
require_nccl "the NCCL paths"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[ "${gpus:-0}" -ge 2 ] || skip "multigpu: ${gpus:-0} GPU visible; NCCL communicators of several ranks need a GPU each"
T=$TMP_ROOT/gpu_multigpu_nccl
rm -rf "$T" && mkdir -p "$T"
status=0

nccl_check node_of_two 2 --ranks-per-node 2 --needs node,world
nccl_check two_nodes_cross 2 --ranks-per-node 1 --needs node,cross
nccl_check reducer_hierarchical_1x2 2 --ranks-per-node 2 --reducer hierarchical
nccl_check reducer_flat_2 2 --ranks-per-node 2 --reducer flat
nccl_check reducer_inter_nccl_2x1 2 --ranks-per-node 1 --reducer hierarchical:nccl
nccl_check reducer_auto_2 2 --ranks-per-node 2 --reducer auto
nccl_check reducer_auto_inter_auto_2x1 2 --ranks-per-node 1 --reducer auto:nccl

# comm-bench --p2p --device cuda: the GPU x GPU links measured and judged.
timeout 60 mpirun -np 2 --oversubscribe --bind-to none "$BIN/scaletrain-comm-bench" --device cuda --p2p \
  --p2p-bytes 64M --p2p-iters 3 --json "$T/p2p.json" >"$T/p2p.txt" 2>&1 ||
  { echo "FAIL: comm-bench --p2p on two GPUs: $(tail -5 "$T/p2p.txt")"; status=1; }
grep -q "^# fast links\|^# verdict\|^# degraded\|fast peers" "$T/p2p.txt" ||
  { echo "FAIL: no link verdict: $(cat "$T/p2p.txt")"; status=1; }
$PY -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert j['links_measured'] and j['gbps'][0][1] > 1 and j['gbps'][1][0] > 1, j
print('ok: GPU x GPU links', j['gbps'][0][1], j['gbps'][1][0], 'GB/s')
" "$T/p2p.json" || status=1

synthetic_data "$T/data" 256 32 32,32,3 10
common=(--model resnet20 --data "$T/data" --epochs 1 --max-steps 8 --batch-size 16 --seed 5 --base-lr 0.05
  --lr-schedule constant --warmup-epochs 0 --momentum 0.9 --log-every 1 --eval-every 1 --bucket-mb 0.25
  --allreduce hierarchical --cuda-aware-mpi off)
run_train node_nccl 2 cuda "--ranks-per-node 2 --intra nccl" "${common[@]}"
run_train node_staged 2 cuda "--ranks-per-node 2 --intra mpi" "${common[@]}"
run_train inter_nccl 2 cuda "--ranks-per-node 1 --intra nccl --inter nccl" "${common[@]}"
for run in node_nccl inter_nccl; do
  compare_losses "$T/$run.log" "$T/node_staged.log" 1e-3 0 8 || status=1
  compare_checkpoints --what params --tolerance 1e-2 "$T/$run" "$T/node_staged" || status=1
  compare_checkpoints --what buffers --tolerance 1e-2 "$T/$run" "$T/node_staged" || status=1
done
[ $status = 0 ] || fail "the NCCL paths on several GPUs (above; logs in $T)"
echo "PASS"
