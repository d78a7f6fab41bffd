#!/usr/bin/env bash
# The gradient all-reduce benchmark of issue 3, section 8 (recorded in docs/performance.md):
# scaletrain-comm-bench with NP ranks emulating nodes of RPN ranks, run RUNS times:
#   1. the whole size sweep (MIN .. MAX bytes) for flat, hierarchical and the MPI_Allreduce baseline;
#   2. a focused run at 64 MiB with more iterations, for the hierarchical / baseline ratio.
# Prints the median over runs of every figure, and the median of the per-run ratios (each ratio
# from one run, so both algorithms saw the same machine load). Raw JSON stays in OUT.
# Usage: tools/bench_comm.sh [RUNS]   env: NP=4 RPN=2 MIN=8 MAX=1G ITERS=5 WARMUP=2
#        FOCUS_ITERS=20 FOCUS_WARMUP=5 BIN=build/bin OUT=/tmp/bench_comm
set -euo pipefail
RUNS=${1:-3}
NP=${NP:-4} RPN=${RPN:-2} MIN=${MIN:-8} MAX=${MAX:-1G} ITERS=${ITERS:-5} WARMUP=${WARMUP:-2}
FOCUS_ITERS=${FOCUS_ITERS:-20} FOCUS_WARMUP=${FOCUS_WARMUP:-5}
BIN=${BIN:-build/bin} OUT=${OUT:-/tmp/bench_comm}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
rm -rf "$OUT" && mkdir -p "$OUT"

mpi=(mpirun -np "$NP" --oversubscribe "$BIN/scaletrain-comm-bench" --ranks-per-node "$RPN")
sweep=("${mpi[@]}" --min-bytes "$MIN" --max-bytes "$MAX" --iters "$ITERS" --warmup "$WARMUP")
focus=("${mpi[@]}" --min-bytes 64M --max-bytes 64M --iters "$FOCUS_ITERS" --warmup "$FOCUS_WARMUP")

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(getconf _NPROCESSORS_ONLN) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs);" \
  "$(free -g | awk '/Mem:/ {print $2}') GiB memory; $(mpirun --version | head -1)"
echo "# load before: $(uptime | sed 's/.*load average/load average/')"
echo "# sweep: ${sweep[*]} --json $OUT/sweep_K.json   (K = 1..$RUNS)"
echo "# focus: ${focus[*]} --json $OUT/focus_K.json"
for k in $(seq 1 "$RUNS"); do
  "${sweep[@]}" --json "$OUT/sweep_$k.json" >"$OUT/sweep_$k.txt"
  "${focus[@]}" --json "$OUT/focus_$k.json" >"$OUT/focus_$k.txt"
  echo "# run $k done, load: $(uptime | sed 's/.*load average: //')"
done
grep -h "topology" "$OUT/sweep_1.txt"
grep -h "skipping" "$OUT/sweep_1.txt" || true
echo "# peak memory per rank: $(grep -h 'peak memory' "$OUT/sweep_1.txt" | sed 's/.*: //')"

/usr/bin/python3 - "$OUT" "$RUNS" <<'EOF'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def load(kind):
    return [json.load(open(f"{out}/{kind}_{k}.json")) for k in range(1, runs + 1)]
def med(values):
    return statistics.median(values)
sweeps, focus = load("sweep"), load("focus")
algos = ["flat", "hierarchical", "mpi"]
sizes = sorted({r["bytes"] for r in sweeps[0]})
wrong = sum(r["wrong"] for s in sweeps + focus for r in s)
print(f"\nMedians over {runs} runs (time in us, busbw in GB/s; nccl-tests definitions):")
print(f"{'bytes':>12}" + "".join(f" {a + ' time':>18} {a + ' busbw':>19}" for a in algos) + f" {'hier/mpi':>9}")
for b in sizes:
    line, busbw = f"{b:>12}", {}
    for a in algos:
        rows = [r for s in sweeps for r in s if r["algorithm"] == a and r["bytes"] == b]
        busbw[a] = med([r["busbw_gbps"] for r in rows])
        line += f" {med([r['time_us'] for r in rows]):>18.1f} {busbw[a]:>19.3f}"
    # Ratio per run (same run, same load), then the median of those.
    ratios = []
    for s in sweeps:
        h = [r["busbw_gbps"] for r in s if r["algorithm"] == "hierarchical" and r["bytes"] == b]
        m = [r["busbw_gbps"] for r in s if r["algorithm"] == "mpi" and r["bytes"] == b]
        if h and m and m[0] > 0:
            ratios.append(h[0] / m[0])
    print(line + (f" {med(ratios):>9.2f}" if ratios else f" {'-':>9}"))
def bus(run, a):
    return [r["busbw_gbps"] for r in run if r["algorithm"] == a][0]
ratios = [bus(r, "hierarchical") / bus(r, "mpi") for r in focus]
print("\n64 MiB focus runs: busbw GB/s per run (flat / hierarchical / mpi):")
for k, r in enumerate(focus, 1):
    print(f"  run {k}: {bus(r, 'flat'):.3f} / {bus(r, 'hierarchical'):.3f} / {bus(r, 'mpi'):.3f}"
          f"  hierarchical/mpi {ratios[k - 1]:.3f}")
print(f"  medians: flat {med([bus(r, 'flat') for r in focus]):.3f}, hierarchical "
      f"{med([bus(r, 'hierarchical') for r in focus]):.3f}, mpi {med([bus(r, 'mpi') for r in focus]):.3f} GB/s")
verdict = "meets" if med(ratios) >= 0.9 else "MISSES"
print(f"  hierarchical / mpi busbw at 64 MiB: median of per-run ratios {med(ratios):.3f} "
      f"(min {min(ratios):.3f}, max {max(ratios):.3f}): {verdict} the 0.9 target")
print(f"wrong elements over all runs: {wrong}")
EOF
echo "# load after: $(uptime | sed 's/.*load average/load average/')"
