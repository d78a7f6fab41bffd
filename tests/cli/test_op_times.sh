#!/usr/bin/env bash
# train --op-times (issue 26, section 6: where a step's time goes, op by op), on real ranks and
# files on the CPU (the host clock; gpu.resnet20_training checks the CUDA events):
#  - the calls per step match the model as its checkpoint has it (independently of the op
#    dispatch): one conv2d_forward and one conv2d_backward_filter per 4-D weight, one batch-norm
#    forward per layer with running statistics, one linear_forward; evaluation and the first step
#    are not counted, so an evaluation in the run changes nothing;
#  - the outermost ops' time fits in the step's compute time (step_split) and fills most of it;
#    every op's share is at most the whole;
#  - the table at the run's end, and report.json without op_times when not asked.
source "$(dirname "$0")/lib.sh"
T=$TMP_ROOT/op_times
rm -rf "$T" && mkdir -p "$T"

# 160 samples, 32 per step: 5 steps an epoch; 2 epochs, each evaluated (the first between steps).
"$BIN/scaletrain-data" synthetic --samples 160 --val-samples 64 --image-size 16,16,3 --classes 5 --shards 2 \
  --output "$T/images" >/dev/null
# One rank: op_times is rank 0's and step_split the mean over ranks, which on a loaded machine may
# differ by more than the check's slack.
RUN=(timeout 300 mpirun -np 1 "$BIN/scaletrain" train --model resnet20 --data "$T/images"
  --batch-size 32 --threads 1 --epochs 2 --eval-every 1 --log-every 0)

echo "== resnet20, 10 steps with an evaluation after step 5"
"${RUN[@]}" --op-times --output-dir "$T/run" >"$T/run.log"
grep -q "^op times per step (rank 0, host_clock, 9 steps after the first): [0-9.]* ms in ops" "$T/run.log" ||
  fail "no op table: $(tail -n 20 "$T/run.log")"
grep -qE "^  conv2d_forward +[0-9.]+ calls" "$T/run.log" || fail "conv2d_forward is not in the table: $(tail -n 20 "$T/run.log")"
"${RUN[@]}" --max-steps 3 --output-dir "$T/plain" >"$T/plain.log"
! grep -q "^op times per step" "$T/plain.log" || fail "an op table without --op-times"
ckpt=$T/run/checkpoints/$(cat "$T/run/checkpoints/latest")
$PY - "$T/run/report.json" "$ckpt" "$T/plain/report.json" <<'PY'
import json, sys
import h5py
r = json.load(open(sys.argv[1]))
assert "op_times" not in json.load(open(sys.argv[3])), "op_times without --op-times"
t = r["op_times"]
assert t["clock"] == "host_clock" and t["steps"] == 9, (t["clock"], t["steps"])
ops = {o["op"]: o for o in t["ops"]}
# The model as the checkpoint has it.
convs = bns = linears = 0
def count(name, obj):
    global convs, bns, linears
    if not isinstance(obj, h5py.Dataset):
        return
    if name.endswith(".weight") and obj.ndim == 4: convs += 1
    if name.endswith(".running_mean"): bns += 1
    if name.endswith(".weight") and obj.ndim == 2: linears += 1
h5py.File(sys.argv[2], "r")["model"].visititems(count)
assert convs == 21 or convs == 19, f"resnet20's checkpoint has {convs} convolutions"
want = {"conv2d_forward": convs, "conv2d_backward_filter": convs, "batch_norm_forward_training": bns,
        "linear_forward": linears}
for op, n in want.items():
    got = ops.get(op, {}).get("calls_per_step")
    assert got == n, f"{op}: {got} calls per step, the checkpoint says {n}"
# Evaluation is not counted: no inference batch norm.
assert "batch_norm_forward_inference" not in ops, ops.get("batch_norm_forward_inference")
# The outermost ops' time within the step's compute, and most of it (the CPU's ops are its work).
compute_ms = r["step_split"]["compute_s"] * 1e3
top = t["top_level_ms_per_step"]
assert 0.5 * compute_ms <= top <= 1.05 * compute_ms + 1.0, f"ops {top:.2f} ms per step, compute {compute_ms:.2f}"
assert all(0.0 <= o["share"] <= 1.0 + 1e-9 for o in t["ops"]), [(o["op"], o["share"]) for o in t["ops"]]
# In fp32 no op of this model calls another: the ops' own times add up to the outermost time.
assert not any(o["nested"] for o in t["ops"]), [o["op"] for o in t["ops"] if o["nested"]]
own = sum(o["ms_per_step"] for o in t["ops"])
assert abs(own - top) <= 0.02 * top + 0.05, f"the ops' times add up to {own:.3f} ms, the outermost time is {top:.3f}"
assert t["ops"] == sorted(t["ops"], key=lambda o: -o["ms_per_step"]), "not the longest first"
print(f"ok: {convs} convolutions, {bns} batch norms; {top:.2f} ms of ops in {compute_ms:.2f} ms of compute per step; "
      f"longest {t['ops'][0]['op']} ({100 * t['ops'][0]['share']:.0f}%)")
PY
echo "PASS: op times"
