# shellcheck shell=bash
# Shared by the GPU training tests (tests/gpu/test_*.sh): each trains the same run twice, the side
# under test on the GPU and the reference on the CPU, from one seed (so from the same weights: the
# run state is set up on the CPU and moved to the GPU) and with the same batches (the loader and
# its seeded augmentation run on the host), and compares the two.
#
# Runs from ctest (ST_BIN, ST_SOURCE, ST_TMP) and from the bundle's tests.sh on a GPU machine, which
# has no h5py and none of our Debian libraries: checkpoints are compared by the build's own
# scaletrain_compare_checkpoints, loss curves by python3 without numpy.
#
# Knobs, read from the environment:
#   ST_GPU_TEST_DEVICE=cpu  run the side under test on the CPU too (default cuda): the harness
#                           (tests/cli/test_gpu_training_harness.sh) checks every comparison with it
#   ST_GPU_TEST_ARGS        extra train options for the side under test only (e.g. "--seed 2"),
#                           which the harness uses to show that a real difference fails
#   ST_GPU_TEST_STEPS, ST_GPU_TEST_BATCH, ST_GPU_TEST_IMAGE (H,W,C), ST_GPU_TEST_THREADS
#                           sizes, smaller in the harness (2 busy cores) than the defaults
set -euo pipefail
BIN=${ST_BIN:-build/bin}
SRC=${ST_SOURCE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
TMP_ROOT=${ST_TMP:-/tmp/scaletrain-test}
# Whatever python3 the machine has: only the standard library is used.
PY=${ST_PYTHON:-python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
DEV=${ST_GPU_TEST_DEVICE:-cuda}
TEST_ARGS=${ST_GPU_TEST_ARGS:-}
THREADS=${ST_GPU_TEST_THREADS:-0}

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

# require_gpu: skip (exit 77) unless GPU 0 is visible to a CUDA build; the build's own device
# inventory decides (it also says "not built" for a build without the CUDA backend).
require_gpu() {
  if [ "$DEV" != cuda ]; then
    echo "note: ST_GPU_TEST_DEVICE=$DEV: the side under test runs on --device $DEV, not on a GPU"
    return 0
  fi
  local out rc=0
  out=$("$BIN/scaletrain_gpu_device_info" 2>&1) || rc=$?
  if [ "$rc" = 77 ]; then
    skip "no GPU visible ($(grep -m1 '^SKIP' <<<"$out" | sed 's/^SKIP: no GPU visible (//; s/)$//'))"
  fi
  [ "$rc" = 0 ] || fail "a GPU is visible but scaletrain_gpu_device_info failed (rc $rc): $(tail -5 <<<"$out")"
}

# run_train NAME NP DEVICE EXTRA_ARGS TRAIN_ARGS...: scaletrain train under mpirun into $T/NAME,
# the log in $T/NAME.log. EXTRA_ARGS (one string, split on spaces) replace the TRAIN_ARGS options
# of the same name (scaletrain refuses an option given twice); every TRAIN_ARGS option has a value.
run_train() {
  local name=$1 np=$2 device=$3 extra=$4
  shift 4
  local -a extra_args=() kept=() args=("$@")
  read -r -a extra_args <<<"$extra"
  local i=0 e replaced
  while [ $i -lt ${#args[@]} ]; do
    replaced=0
    for e in "${extra_args[@]}"; do [[ $e == --* && $e == "${args[$i]}" ]] && replaced=1; done
    if [ $replaced = 1 ]; then i=$((i + 2)); else kept+=("${args[$i]}"); i=$((i + 1)); fi
  done
  rm -rf "${T:?}/$name"
  local start=$SECONDS
  # ST_GPU_TEST_STREAM=1: the progress lines go to this test's output as well, so that a run
  # stopped at its time limit still shows how far it got and at what pace.
  local stream=() rc=0
  [ "${ST_GPU_TEST_STREAM:-0}" = 1 ] && stream=(grep --line-buffered -E "step [0-9]+/|epoch [0-9]+ done|device:|all-reduce:")
  if [ ${#stream[@]} -gt 0 ]; then
    mpirun -np "$np" --oversubscribe --bind-to none "$BIN/scaletrain" train --device "$device" --threads "$THREADS" \
      --output-dir "$T/$name" --overwrite "${kept[@]}" "${extra_args[@]}" 2>&1 | tee "$T/$name.log" |
      { "${stream[@]}" || true; } || rc=$?
    [ "$rc" = 0 ] || fail "$name: train --device $device failed: $(tail -20 "$T/$name.log")"
  else
    mpirun -np "$np" --oversubscribe --bind-to none "$BIN/scaletrain" train --device "$device" --threads "$THREADS" \
      --output-dir "$T/$name" --overwrite "${kept[@]}" "${extra_args[@]}" >"$T/$name.log" 2>&1 ||
      fail "$name: train --device $device failed: $(tail -20 "$T/$name.log")"
  fi
  echo "ok: $name: trained on --device $device with $np rank(s) in $((SECONDS - start)) s"
}

# compare_losses TEST_LOG REF_LOG RTOL ATOL [FIRST]: rank 0's per-step losses (--log-every 1
# progress lines) agree step by step: |test - ref| <= RTOL * |ref| + ATOL, over every step or over
# the FIRST steps only. Prints the largest difference; fails naming the first step over the
# tolerance.
compare_losses() {
  "$PY" - "$@" <<'PY'
import re, sys
test_log, ref_log, rtol, atol = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
first = int(sys.argv[5]) if len(sys.argv) > 5 else None
def losses(path):
    return [float(m.group(1)) for m in re.finditer(r"step \d+/\d+  loss ([-+0-9.eEnaif]+)", open(path).read())]
a, b = losses(test_log), losses(ref_log)
if not b or len(a) != len(b):
    sys.exit(f"FAIL: loss curves: {len(a)} steps logged in {test_log}, {len(b)} in {ref_log}")
if first is not None:
    a, b = a[:first], b[:first]
what = f"the first {len(b)} steps" if first is not None else f"{len(b)} steps"
worst = max(range(len(b)), key=lambda i: abs(a[i] - b[i]) / (rtol * abs(b[i]) + atol))
print(f"loss curves, {what}: first {a[0]:.5f} / {b[0]:.5f}, last {a[-1]:.5f} / {b[-1]:.5f} (test / ref); "
      f"largest difference at step {worst + 1}: {a[worst]:.5f} vs {b[worst]:.5f}")
for i, (x, y) in enumerate(zip(a, b)):
    if not abs(x - y) <= rtol * abs(y) + atol:
        sys.exit(f"FAIL: loss curves: step {i + 1}: loss {x:.5f} (test) vs {y:.5f} (ref), over the tolerance "
                 f"{rtol:g} x |ref| + {atol:g}")
print(f"ok: loss curves agree within {rtol:g} x |ref| + {atol:g} over {what}")
PY
}

# compare_learning TEST_LOG REF_LOG LAST RTOL: both runs learn alike: the mean of rank 0's last
# LAST step losses agree within RTOL of the reference's, and (in a run of at least 2 x LAST steps)
# both are below the first step's loss.
# Over tens of steps, fp32 training on two devices follows two trajectories (SGD with momentum and
# batch norm amplify the last-bit differences of the first step), so losses are compared step by
# step only at the start (compare_losses ... FIRST) and by what the run achieved at the end.
compare_learning() {
  "$PY" - "$@" <<'PY'
import re, sys
test_log, ref_log, last, rtol = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
def losses(path):
    return [float(m.group(1)) for m in re.finditer(r"step \d+/\d+  loss ([-+0-9.eEnaif]+)", open(path).read())]
a, b = losses(test_log), losses(ref_log)
if not b or len(a) != len(b) or len(b) < last:
    sys.exit(f"FAIL: learning: {len(a)} steps logged in {test_log}, {len(b)} in {ref_log}, {last} needed")
ma, mb = sum(a[-last:]) / last, sum(b[-last:]) / last
print(f"learning: mean loss of the last {last} steps {ma:.4f} (test) vs {mb:.4f} (ref); first step {a[0]:.4f} / {b[0]:.4f}")
if not abs(ma - mb) <= rtol * abs(mb):
    sys.exit(f"FAIL: learning: mean loss of the last {last} steps {ma:.4f} (test) vs {mb:.4f} (ref), over {rtol:g} x |ref|")
if len(b) < 2 * last:  # a short run (the harness's): too few steps to ask for learning
    print(f"ok: the last {last} steps' mean losses agree within {rtol:g} x |ref| ({len(b)} steps: too few to ask for learning)")
    sys.exit(0)
if not (ma < a[0] and mb < b[0]):
    sys.exit(f"FAIL: learning: a run did not learn (the last {last} steps' mean loss is not below the first step's)")
print(f"ok: both runs learn alike (last {last} steps' mean loss within {rtol:g} x |ref|, below the first step's)")
PY
}

# compare_checkpoints ARGS...: scaletrain_compare_checkpoints, its report on stdout.
compare_checkpoints() {
  "$BIN/scaletrain_compare_checkpoints" "$@"
}

# synthetic_data DIR SAMPLES VAL_SAMPLES IMAGE CLASSES: a seeded, learnable image dataset.
synthetic_data() {
  "$BIN/scaletrain-data" synthetic --task image_classification --samples "$2" --val-samples "$3" \
    --image-size "$4" --classes "$5" --shards 2 --output "$1" >/dev/null ||
    fail "scaletrain-data synthetic failed"
}

# require_nccl WHAT: skip (77) unless the side under test is a GPU and this build has NCCL (its
# NCCL check program); WHAT names the test's subject in the reason.
require_nccl() {
  [ "$DEV" = cuda ] || skip "$1 needs a GPU (ST_GPU_TEST_DEVICE=$DEV)"
  [ -x "$BIN/scaletrain_gpu_nccl_check" ] || skip "this build has no NCCL (no $BIN/scaletrain_gpu_nccl_check)"
}

# nccl_check NAME NP ARGS...: scaletrain_gpu_nccl_check under mpirun with a time limit, its output
# in $T/NAME.log; prints ok or FAIL (a rank that hung says so) and sets status=1 on failure.
nccl_check() {
  local name=$1 np=$2 rc=0
  shift 2
  timeout 60 mpirun -np "$np" --oversubscribe --bind-to none "$BIN/scaletrain_gpu_nccl_check" "$@" \
    >"$T/$name.log" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    echo "ok: $name: $(tail -1 "$T/$name.log")"
  else
    echo "FAIL: $name (rc $rc$([ "$rc" = 124 ] && echo ': a rank hung')): $(grep -m5 'FAIL\|rror' "$T/$name.log")"
    status=1
  fi
}
