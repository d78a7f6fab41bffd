#!/usr/bin/env bash
# Training throughput of the demo model, scaletrain against PyTorch, side by side in one run:
# ResNet-20 on Fashion-MNIST, global batch 128. scaletrain: 2 MPI ranks x 1 thread (as `make run`);
# PyTorch 1.13: one process, 2 threads (tools/torch_baseline.py, same model and recipe).
# Rounds alternate the two so that machine noise hits both; medians are reported.
#
#   tools/bench_demo.sh [ROUNDS] [SCALETRAIN_STEPS] [TORCH_STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
st_steps=${2:-200}
torch_steps=${3:-60}
data=${DATA:-data/fashion-mnist}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -d "$data/train" ] || { echo "bench_demo: no dataset at $data (run make data)" >&2; exit 2; }

st=() torch=()
for r in $(seq "$rounds"); do
  mpirun -np 2 build/bin/scaletrain train --config inputs/resnet20_fashion_mnist.ini --data "$data" \
    --output-dir "$tmp/st$r" --max-steps "$st_steps" --log-every 0 --eval-every 1000 >/dev/null
  st+=("$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['throughput']['samples_per_s'])" \
    "$tmp/st$r/report.json")")
  torch+=("$(/usr/bin/python3 tools/torch_baseline.py --threads 2 --batch-size 128 --max-steps "$torch_steps" |
    sed -n 's/^throughput \([0-9.]*\).*/\1/p')")
  echo "round $r: scaletrain ${st[-1]} samples/s, pytorch ${torch[-1]} samples/s"
done
/usr/bin/python3 - "${st[*]}" "${torch[*]}" <<'PY'
import statistics, sys
st = [float(x) for x in sys.argv[1].split()]
pt = [float(x) for x in sys.argv[2].split()]
ms, mp = statistics.median(st), statistics.median(pt)
print(f"| | median samples/s | runs |\n|---|---|---|")
print(f"| scaletrain, 2 ranks x 1 thread | {ms:.0f} | {', '.join(f'{x:.0f}' for x in st)} |")
print(f"| PyTorch 1.13, 1 process x 2 threads | {mp:.0f} | {', '.join(f'{x:.0f}' for x in pt)} |")
print(f"| ratio scaletrain / PyTorch | {ms / mp:.2f} | |")
PY
