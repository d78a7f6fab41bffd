#!/usr/bin/env bash
# The Transformer's learning check (issue 25, section 5): transformer-tiny on 2 ranks learns to
# reverse its source (scaletrain-data synthetic --task translation --kind reverse: 20 words,
# sentences of 2 to 10, 20,000 pairs), which it can only do by attending to the right source
# position, and reaches BLEU above 90 on the 200 held-out pairs within a few minutes of this CPU.
# The run evaluates every epoch and stops at the first BLEU of 90 (--target-accuracy); the BLEU is
# read from report.json. 35 to 45 s (3 epochs) on the 2-core development machine.
# Not part of `make test` (label `learning`, `make test-learning`).
set -euo pipefail
BIN=${ST_BIN:-build/bin}
TMP_ROOT=${ST_TMP:-/tmp/scaletrain-test}
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }
T=$TMP_ROOT/learning_transformer_reverse
rm -rf "$T" && mkdir -p "$T"

"$BIN/scaletrain-data" synthetic --task translation --kind reverse --sentences 20000 --val-sentences 200 --words 20 \
  --max-length 10 --seed 25 --output "$T/data" >/dev/null
cmd=(mpirun -np 2 --oversubscribe --bind-to none "$BIN/scaletrain" train --model transformer-tiny --data "$T/data"
  --output-dir "$T/run" --threads 1 --epochs 10 --batch-tokens 1024 --warmup-steps 200 --base-lr 0.002
  --target-accuracy 90 --log-every 50)
echo "command: ${cmd[*]}"
start=$(date +%s)
timeout -s USR1 -k 120 600 "${cmd[@]}" >"$T/train.log" 2>&1 || fail "train failed: $(tail -n 5 "$T/train.log")"
grep -E "epoch [0-9]+ done" "$T/train.log"
$PY - "$T/run/report.json" "$(($(date +%s) - start))" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bleu = r["final_val_accuracy"]
print(f"BLEU {bleu:.2f} after {len(r['epochs'])} epochs, {sys.argv[2]} s; status {r['status']}")
assert bleu > 90, f"BLEU {bleu:.2f} is not above 90"
PY
echo "PASS"
