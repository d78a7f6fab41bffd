#!/usr/bin/env bash
# --device for train, eval and predict (issue 10, section 2): without a GPU, --device cuda is a
# clear error on every rank within seconds (no hang), naming the rank, its host and why; --device
# auto falls back to the CPU and says so in the start-up lines; a bad value names the choices.
# The no-GPU expectations need a machine without a GPU (CI's); with one, --device cuda trains there
# with any optimizer (every op has a CUDA kernel; unit.op_registry checks the refusal's wording).
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/device_choice
rm -rf "$T" && mkdir -p "$T"

"$BIN/scaletrain-data" synthetic --task image_classification --samples 64 --val-samples 16 --image-size 8,8,1 \
  --classes 4 --shards 2 --output "$T/data" >/dev/null
common=(--model resnet20 --data "$T/data" --batch-size 8 --threads 1 --log-every 0 --max-steps 2)

if command -v nvidia-smi >/dev/null && nvidia-smi >/dev/null 2>&1; then
  # Every op has a CUDA kernel (docs/ops.md): --optimizer lars trains there too.
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train "${common[@]}" --output-dir "$T/lars" --device cuda \
    --optimizer lars >"$T/lars.log" 2>&1 || fail "train --device cuda --optimizer lars failed: $(tail -20 "$T/lars.log")"
  grep -q "device: cuda" "$T/lars.log" || fail "train --device cuda did not say so: $(head -20 "$T/lars.log")"
  echo "PASS (a GPU is visible: the no-GPU cases are for machines without one)"
  exit 0
else
  cuda_refusal="no GPU on rank 0 (host $(hostname))"
  auto_line="device: cpu (--device auto: no GPU on rank 0 (host $(hostname)): "
fi

expect_failure "bad --device value" "--device gpu: use auto" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train "${common[@]}" --output-dir "$T/bad" --device gpu
expect_failure "train --device cuda" "train --device cuda: $cuda_refusal" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" train "${common[@]}" --output-dir "$T/cuda" --device cuda
[ ! -e "$T/cuda/report.json" ] || fail "a refused --device cuda run wrote a report"

# auto: the CPU, said in the start-up lines; the report records the option.
mpirun -np 2 --oversubscribe "$BIN/scaletrain" train "${common[@]}" --output-dir "$T/auto" >"$T/auto.log" 2>&1 ||
  fail "train --device auto failed: $(tail -20 "$T/auto.log")"
grep -qF -- "$auto_line" "$T/auto.log" || fail "train --device auto did not say it chose the CPU: $(head -20 "$T/auto.log")"
$PY - "$T/auto/report.json" <<'PY' || fail "report.json does not record --device auto"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["config"]["device"] == "auto", r["config"].get("device")
PY
echo "ok: train --device auto ran on the CPU and said so"

mpirun -np 1 "$BIN/scaletrain" train "${common[@]}" --output-dir "$T/cpu" --device cpu --tf32 --conv-algo graph \
  --conv-nondeterministic >"$T/cpu.log" 2>&1 ||
  fail "train --device cpu failed: $(tail -20 "$T/cpu.log")"
grep -qF "device: cpu (--device cpu)" "$T/cpu.log" || fail "train --device cpu did not say so: $(head -20 "$T/cpu.log")"
for option in "--tf32" "--conv-algo graph" "--conv-nondeterministic"; do
  grep -qF -- "$option has no effect on the CPU" "$T/cpu.log" || fail "$option on the CPU was not noted: $(head -20 "$T/cpu.log")"
done
$PY -c "import json,sys; c=json.load(open(sys.argv[1]))['config']; assert c['tf32'] is True and c['device'] == 'cpu' and c['conv_algo'] == 'graph' and c['conv_nondeterministic'] is True, c" \
  "$T/cpu/report.json" || fail "report.json config lacks device cpu / tf32 true / conv_algo graph / conv_nondeterministic true"
echo "ok: train --device cpu (--tf32, --conv-algo graph and --conv-nondeterministic noted as without effect)"

# eval and predict choose alike; predict's choice involves every rank although rank 0 computes.
expect_failure "eval --device cuda" "eval --device cuda: $cuda_refusal" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" eval --model resnet20 --checkpoint "$T/auto" --data "$T/data" \
  --threads 1 --device cuda
mpirun -np 2 --oversubscribe "$BIN/scaletrain" eval --model resnet20 --checkpoint "$T/auto" --data "$T/data" \
  --threads 1 >"$T/eval.log" 2>&1 || fail "eval --device auto failed: $(tail -20 "$T/eval.log")"
grep -qF "device: cpu (--device auto:" "$T/eval.log" || fail "eval --device auto did not say so: $(cat "$T/eval.log")"
grep -qF "top-1 accuracy" "$T/eval.log" || fail "eval --device auto printed no accuracy: $(cat "$T/eval.log")"
echo "ok: eval --device auto"
$PY -c "import h5py, numpy as np; h5py.File('$T/in.h5', 'w')['inputs'] = np.zeros((2, 1, 8, 8), np.float32)"
expect_failure "predict --device cuda" "predict --device cuda: $cuda_refusal" \
  mpirun -np 2 --oversubscribe "$BIN/scaletrain" predict --model resnet20 --checkpoint "$T/auto" --input "$T/in.h5" \
  --output "$T/out.h5" --device cuda
[ ! -e "$T/out.h5" ] || fail "a refused predict wrote its output"
echo "PASS"
