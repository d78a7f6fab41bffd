#!/usr/bin/env bash
# What a preemption costs (issue 9, section 8; recorded in docs/performance.md): ResNet-50 at
# 224x224 on 2 ranks of this CPU machine, interrupted by SIGUSR1 (what Slurm sends with --signal;
# here sent to mpirun, which forwards it to every rank) and resumed with --resume auto. Every
# output line is time-stamped as it arrives (rank 0 flushes each line), and each round measures
#   signal -> checkpointed:   the step in flight, the agreement and the checkpoint;
#   signal -> exit:           until mpirun has exited (report.json, MPI_Finalize, mpirun's teardown);
#   restart -> resumed:       mpirun and MPI start-up, set-up, reading, verifying and broadcasting
#                             the checkpoint (the "resumed from" line);
#   restart -> first step:    the above and the first step, which warms up (first touch, oneDNN);
# and, for scale, the steady step time and the checkpoint's write time.
# Usage: tools/bench_preempt.sh [ROUNDS]   env: BIN=build/bin OUT=build/bench_preempt
set -euo pipefail
ROUNDS=${1:-3}
BIN=${BIN:-build/bin} OUT=${OUT:-build/bench_preempt}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
rm -rf "$OUT" && mkdir -p "$OUT"

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(getconf _NPROCESSORS_ONLN) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
"$BIN/scaletrain-data" synthetic --samples 512 --val-samples 16 --image-size 224,224,3 --classes 1000 --shards 2 \
  --output "$OUT/data" >/dev/null
train=(mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet50 --data "$OUT/data" --batch-size 4
  --epochs 1 --eval-every 0 --threads 1 --log-every 1)
echo "# ${train[*]} --output-dir $OUT/run_K [--resume auto]; SIGUSR1 to mpirun after the 3rd step's line"

now() { date +%s.%N; }
stamped() {  # LOG CMD...: runs CMD with every output line prefixed by its arrival time
  local log=$1
  shift
  echo "$(now) LAUNCH" >"$log"
  "$@" 2>&1 | while IFS= read -r line; do echo "$(now) $line"; done >>"$log" || true
  echo "$(now) EXIT" >>"$log"
}
wait_line() { until grep -q -- "$2" "$1" 2>/dev/null; do sleep 0.01; done; }

for k in $(seq 1 "$ROUNDS"); do
  stamped "$OUT/first_$k.log" "${train[@]}" --output-dir "$OUT/run_$k" &
  wait_line "$OUT/first_$k.log" "step 3/"
  echo "$(now) SIGNAL" >>"$OUT/first_$k.log"
  kill -USR1 "$(pgrep -x mpirun)"
  wait
  stamped "$OUT/second_$k.log" "${train[@]}" --output-dir "$OUT/run_$k" --resume auto &
  wait_line "$OUT/second_$k.log" "  step [0-9]*/"
  kill -USR1 "$(pgrep -x mpirun)"
  wait
  echo "# round $k done"
done

/usr/bin/python3 - "$OUT" "$ROUNDS" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def events(path):
    return [(float(l.split(" ", 1)[0]), l.split(" ", 1)[1].rstrip("\n")) for l in open(path) if " " in l]
def first(ev, pattern, after=0.0):
    return next(t for t, l in ev if t >= after and re.search(pattern, l))
rows = {k: [] for k in ("stop_ckpt", "stop_exit", "start_resumed", "start_step", "first_step", "step", "write")}
for k in range(1, rounds + 1):
    a, b = events(f"{out}/first_{k}.log"), events(f"{out}/second_{k}.log")
    sig = first(a, "^SIGNAL$")
    rows["stop_ckpt"].append(first(a, "^stopped for SIGUSR1", sig) - sig)
    rows["stop_exit"].append(first(a, "^EXIT$", sig) - sig)
    launch, resumed, stepped = first(b, "^LAUNCH$"), first(b, "^resumed from "), first(b, "  step [0-9]+/")
    rows["start_resumed"].append(resumed - launch)
    rows["start_step"].append(stepped - launch)
    rows["first_step"].append(stepped - resumed)
    steps = [t for t, l in a if re.search("  step [0-9]+/", l)]
    rows["step"] += [y - x for x, y in zip(steps[1:], steps[2:])]
    rows["write"] += [float(x) for x in re.findall(r"MB in ([0-9.]+) s", "\n".join(l for _, l in a))]
med = statistics.median
def line(label, key, note=""):
    print(f"{label:<34} median {med(rows[key]):5.1f} s  (" + ", ".join(f"{v:.1f}" for v in rows[key]) + f"){note}")
line("signal -> checkpointed, stopping", "stop_ckpt", "  step in flight + agreement + checkpoint")
line("signal -> mpirun exited", "stop_exit")
line("restart -> resumed (state loaded)", "start_resumed")
line("restart -> first step done", "start_step")
line("  of which the first step", "first_step")
line("steady step time", "step", "  ResNet-50 224x224, 4 per rank, 1 thread per rank")
line("checkpoint write (rank 0)", "write")
PY
