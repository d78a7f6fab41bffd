#!/usr/bin/env bash
# kill -9 at random moments (issue 9): a 2-rank run that checkpoints every 2 steps loses one rank
# to SIGKILL 12 times (ST_KILLS; 20 until the suite reached its time limit), at random moments
# (during steps, evaluations and checkpoint writes). After every kill each published checkpoint
# verifies (its CRC-32, checked here with h5py and zlib) and the next --resume auto continues from
# the newest one without skipping any; the run then finishes with the weights of an uninterrupted
# run, bit for bit (the work lost after each checkpoint is redone exactly), and report.json lists
# the lost segments.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/train_kill
rm -rf "$T" && mkdir -p "$T"
CK=("$PY" "$(dirname "$0")/checkpoints.py")
KILLS=${ST_KILLS:-12}

# 16384 samples, global batch 16: 1024 steps per epoch, 3072 steps (about 25 s here, longer than
# the kills take, so that every kill hits a running job).
"$BIN/scaletrain-data" synthetic --samples 16384 --val-samples 32 --image-size 8,8,3 --classes 4 --shards 2 \
  --output "$T/data" >/dev/null
TRAIN=(mpirun -np 2 --oversubscribe "$BIN/scaletrain" train --model resnet20 --data "$T/data" --epochs 3
  --batch-size 8 --threads 1 --log-every 0)

timeout 300 "${TRAIN[@]}" --output-dir "$T/ref" >"$T/ref.log"


RANDOM=9  # a fixed sequence of moments, the same on every run of the test
for k in $(seq "$KILLS"); do
  timeout 300 "${TRAIN[@]}" --output-dir "$T/run" --resume auto --checkpoint-every-steps 2 >"$T/kill$k.log" 2>&1 &
  job=$!
  sleep "$((RANDOM % 1800 / 1000)).$(printf '%03d' $((200 + RANDOM % 800)))"
  victims=($(our_scaletrain_pids))
  [ "${#victims[@]}" -gt 0 ] || fail "kill $k: the run ended before the kill: $(tail -n 3 "$T/kill$k.log")"
  kill -9 "${victims[RANDOM % ${#victims[@]}]}" 2>/dev/null || true
  wait $job || true
  no_scaletrain_left
  ! grep -q "skipping checkpoint" "$T/kill$k.log" || fail "kill $k: a published checkpoint was damaged: $(cat "$T/kill$k.log")"
  if [ -d "$T/run/checkpoints" ] && ls "$T/run/checkpoints/"step-*.h5 >/dev/null 2>&1; then
    "${CK[@]}" verify "$T/run" >/dev/null || fail "kill $k: a published checkpoint does not verify"
    latest=$("${CK[@]}" latest "$T/run") || fail "kill $k: the latest checkpoint does not load"
    echo "kill $k: latest $(basename "$latest") verifies$(ls "$T/run/checkpoints/"*.tmp >/dev/null 2>&1 && echo "; a partial write left as .tmp")"
  else
    echo "kill $k: killed before the first checkpoint"
  fi
done

timeout 300 "${TRAIN[@]}" --output-dir "$T/run" --resume auto --checkpoint-every-steps 2 >"$T/final.log"
! ls "$T/run/checkpoints/"*.tmp 2>/dev/null || fail "partial writes left after the final run"
$PY - "$T/run" <<'PY'
import json, sys
r = json.load(open(sys.argv[1] + "/report.json"))
reasons = [s["reason"] for s in r["segments"]]
assert r["status"] == "completed" and r["steps"] == 3072, (r["status"], r["steps"])
assert reasons[-1] == "completed" and set(reasons[:-1]) <= {"lost"} and len(reasons) >= 2, reasons
steps = [(s["first_step"], s["last_step"]) for s in r["segments"]]
assert all(a[1] == b[0] for a, b in zip(steps, steps[1:])), steps  # each segment resumed where one ended
print(f"{len(reasons)} segments ({len(reasons) - 1} lost to kill -9), step ranges {steps}")
PY
"${CK[@]}" same "$T/ref" "$T/run"
echo "kill -9 test passed"
