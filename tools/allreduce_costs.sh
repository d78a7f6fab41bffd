#!/usr/bin/env bash
# The GPU all-reduce's transports on paper (issue 27, section 8): what each costs a DGX-1 job of 1 to
# 80 nodes (8 V100 per node, NVLink inside, 4x EDR InfiniBand across; share/advisor/machines/
# dgx1-4xedr.json, whose figures come from ../shared/reference/FACTS.md), by the scaling model of
# scaletrain-advisor (docs/scaling-model.md), for ResNet-50 in mixed precision (the MLPerf v0.6
# calibration) at 208 and 32 images per GPU, weak scaling. One row per node count, per transport:
#   flat --intra nccl                      NCCL's own ring or tree over every GPU (the model's ring
#                                          and tree; NCCL picks per size, as the model's auto does)
#   hierarchical --intra nccl, no staging  --inter nccl, or --inter mpi with a CUDA-aware MPI and
#                                          GPUDirect RDMA (the model's hierarchical, host_copy 0)
#   hierarchical --intra nccl --inter mpi  staged through pinned host memory (an MPI that is not
#                                          CUDA-aware, as Debian's): PCIe gen3 x16 at 12 GB/s
# and the model's choice among them. Prints a markdown table: per-step all-reduce time, its exposed
# part after the overlap with backward, and the parallel efficiency.
#
#   tools/allreduce_costs.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build}/bin
calibration=share/advisor/calibrations/resnet50-v100-mixed-mlperf-v0.6.json
machine=share/advisor/machines/dgx1-4xedr.json
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
/usr/bin/python3 - "$machine" "$out/staged.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["host_copy_GBps"] = 12.0
m["name"] += ", MPI across nodes staged through host memory (PCIe gen3 x16, 12 GB/s)"
json.dump(m, open(sys.argv[2], "w"), indent=1)
PY
gpus=8,16,64,256,640
for batch in 208 32; do
  for variant in ring tree hierarchical staged auto; do
    algorithm=$variant machine_file=$machine
    [ "$variant" = staged ] && algorithm=hierarchical machine_file=$out/staged.json
    "$bin/scaletrain-advisor" predict --calibration "$calibration" --machine "$machine_file" --scaling weak \
      --gpus "$gpus" --batch "$batch" --algorithm "$algorithm" --json "$out/$variant-$batch.json" >/dev/null
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
names = [("ring", "flat --intra nccl, ring"), ("tree", "flat --intra nccl, tree"),
         ("hierarchical", "hierarchical --intra nccl, no staging"),
         ("staged", "hierarchical --intra nccl --inter mpi, staged")]
for batch in (208, 32):
    runs = {v: json.load(open(f"{out}/{v}-{batch}.json"))["series"]["weak"] for v, _ in names + [("auto", "")]}
    print(f"\nResNet-50 mixed precision, {batch} images per GPU, weak scaling "
          "(all-reduce ms per step / exposed ms / efficiency):\n")
    header = "| nodes (GPUs) | " + " | ".join(label for _, label in names) + " | the model's choice |"
    print(header)
    print("|" + " --- |" * (len(names) + 2))
    for i, row in enumerate(runs["ring"]):
        cells = []
        for v, _ in names:
            r = runs[v][i]
            cells.append(f"{r['comm_s'] * 1e3:.2f} / {r['exposed_comm_s'] * 1e3:.2f} / {r['efficiency'] * 100:.1f}%")
        print(f"| {row['nodes']} ({row['gpus']}) | " + " | ".join(cells) + f" | {runs['auto'][i]['algorithm']} |")
PY
