#!/usr/bin/env bash
# Stalled and dead ranks (issue 9): one rank of a 2-rank run is stopped with SIGSTOP; the stall
# warning names it (rank and host) within --stall-warn-s + 10 s, and after --stall-abort-s the
# job ends on every rank with exit code 3 and the same account. A rank killed with SIGKILL ends
# the job within 30 s, and mpirun's message names the rank and its host.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/train_stall
rm -rf "$T" && mkdir -p "$T"
host=$(hostname)

"$BIN/scaletrain-data" synthetic --samples 8192 --val-samples 32 --image-size 8,8,3 --classes 4 --shards 2 \
  --output "$T/data" >/dev/null
TRAIN=(timeout 120 mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/data" --epochs 2
  --batch-size 8 --threads 1 --log-every 20)

wait_for() {  # FILE PATTERN SECONDS: seconds waited, or fail
  local start=$SECONDS
  while ! grep -q -- "$2" "$1" 2>/dev/null; do
    [ $((SECONDS - start)) -lt "$3" ] || fail "no '$2' in $1 within $3 s: $(tail -n 5 "$1")"
    sleep 0.1
  done
  echo $((SECONDS - start))
}

echo "== SIGSTOP: warning, then abort"
warn=3 abort=12
"${TRAIN[@]}" --output-dir "$T/stall" --stall-warn-s $warn --stall-abort-s $abort >"$T/stall.log" 2>&1 &
job=$!
wait_for "$T/stall.log" "step 100/" 60 >/dev/null
victim=$(rank_pid 1)
kill -STOP "$victim"
stopped=$SECONDS
waited=$(wait_for "$T/stall.log" "stall: no progress for" $((warn + 10)))
grep -q "not arrived: rank 1 on $host (silent for [0-9]* s, last heard in [a-z_ ]* of step [0-9]*)" "$T/stall.log" ||
  fail "the warning does not name rank 1 on $host as silent: $(grep stall "$T/stall.log")"
echo "ok: warning after $waited s: $(grep -m1 "stall: no progress" "$T/stall.log")"
rc=0
wait $job || rc=$?
ended=$((SECONDS - stopped))
[ "$rc" -eq 3 ] || fail "exit code $rc after the stall abort, expected 3: $(tail -n 8 "$T/stall.log")"
[ "$ended" -le $((abort + 15)) ] || fail "the job ended $ended s after SIGSTOP (--stall-abort-s $abort)"
grep -q "stalled, aborting the job: no progress for .*not arrived: rank 1 on $host" "$T/stall.log" ||
  fail "no abort message naming rank 1: $(tail -n 8 "$T/stall.log")"
no_scaletrain_left
echo "ok: aborted $ended s after SIGSTOP with exit code 3; no process left"

echo "== SIGKILL: the job ends, naming the rank and host"
"${TRAIN[@]}" --output-dir "$T/dead" >"$T/dead.log" 2>&1 &
job=$!
wait_for "$T/dead.log" "step 40/" 60 >/dev/null
kill -9 "$(rank_pid 1)"
killed=$SECONDS
rc=0
wait $job || rc=$?
ended=$((SECONDS - killed))
[ "$rc" -ne 0 ] || fail "mpirun exited 0 after a rank was killed"
[ "$ended" -le 30 ] || fail "the job ended $ended s after the kill"
grep -q "process rank 1 with PID .* on node $host exited on signal 9" "$T/dead.log" ||
  fail "mpirun does not name rank 1 on $host: $(tail -n 8 "$T/dead.log")"
no_scaletrain_left
echo "ok: dead rank ended the job in $ended s (exit $rc), named by mpirun"
echo "stall tests passed"
