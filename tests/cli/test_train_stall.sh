#!/usr/bin/env bash
# Stalled and dead ranks (issue 9): one rank of a 2-rank run is stopped with SIGSTOP; the stall
# warning names it (rank and host) within --stall-warn-s + 10 s, and after --stall-abort-s the
# job ends on every rank with exit code 3 and the same account. A rank killed with SIGKILL ends
# the job within 30 s, and mpirun's message names the rank and its host. A transport error polled
# by the watchdog (NCCL's asynchronous errors; a test hook here) ends the job at once, naming it.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/train_stall
rm -rf "$T" && mkdir -p "$T"
host=$(hostname)

"$BIN/scaletrain-data" synthetic --samples 8192 --val-samples 32 --image-size 8,8,3 --classes 4 --shards 2 \
  --output "$T/data" >/dev/null
# 20 epochs: far more than the tests wait for (a fast machine must not finish before the stop).
TRAIN=(timeout 120 mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/data" --epochs 20
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
# Heartbeats go every --stall-warn-s / 10 (0.3 s): on a loaded machine 100 steps can pass before
# rank 0 has heard rank 1's first, so let several beats pass before the stop.
sleep 2
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
echo "== a read that never returns: named with its shard and sample, then the job ends"
# tests/faults/hang_reads.c makes the I/O thread's reads of shard 1 block forever after 20 reads
# (a hung file system, or a library looping on a damaged file): the loader names what it reads.
hang_shard="$T/data/train/shard-00001-of-00002.h5"
rc=0
# In the sanitizer build, no leak check at exit here: LeakSanitizer suspends every thread of the
# aborting rank with ptrace, and its tracer crashed (SIGSEGV) on the thread hung in its read,
# turning the abort's exit code 3 into 1 (seen twice in full runs of make test-sanitize). The job
# is aborted on purpose; its leaks are not the test's subject.
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0:detect_leaks=0 ST_HANG_READS_OF="$hang_shard" ST_HANG_AFTER=20 \
  LD_PRELOAD="$ST_FAULT_HANG_READS" "${TRAIN[@]}" --output-dir "$T/hung" --stall-warn-s 2 --stall-abort-s 8 \
  >"$T/hung.log" 2>&1 || rc=$?  # mpirun's local ranks inherit the environment
[ "$rc" -eq 3 ] || fail "exit code $rc after a hung read, expected 3: $(tail -n 8 "$T/hung.log")"
grep -q "stall: no progress for .*its data loader reading $hang_shard: sample [0-9]* (row [0-9]*)" "$T/hung.log" ||
  fail "the warning does not name the shard and sample being read: $(grep -m2 stall "$T/hung.log")"
grep -q "stalled, aborting the job: .*its data loader reading $hang_shard: sample" "$T/hung.log" ||
  fail "the abort does not name the shard: $(tail -n 5 "$T/hung.log")"
no_scaletrain_left
echo "ok: $(grep -m1 -o "its data loader reading [^;]*" "$T/hung.log")"
echo "== a transport error (NCCL's asynchronous errors; here the test hook): the job ends at once"
rc=0
start=$SECONDS
SCALETRAIN_INJECT_COMM_ERROR=30:1 "${TRAIN[@]}" --output-dir "$T/comm_error" --stall-warn-s 2 \
  >"$T/comm_error.log" 2>&1 || rc=$?  # mpirun's local ranks inherit the environment
[ "$rc" -eq 3 ] || fail "exit code $rc after a transport error, expected 3: $(tail -n 8 "$T/comm_error.log")"
grep -q "scaletrain: error: \[rank 1 on $host\] injected communication error (SCALETRAIN_INJECT_COMM_ERROR); aborting" \
  "$T/comm_error.log" || fail "the abort does not name rank 1 and its error: $(tail -n 8 "$T/comm_error.log")"
no_scaletrain_left
echo "ok: a transport error on rank 1 ended the job in $((SECONDS - start)) s (exit 3)"
echo "stall tests passed"
