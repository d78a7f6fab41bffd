# Shared helpers for the command-line tests: real binaries, real files, real mpirun.
set -euo pipefail
BIN=${ST_BIN:-build/bin}
TMP_ROOT=${ST_TMP:-/tmp/scaletrain-test}
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1

fail() { echo "FAIL: $*" >&2; exit 1; }

# run_failing NAME CMD...: runs CMD with a 60 s limit into $out and $rc (the caller's locals);
# fails the test unless it exited non-zero without hanging.
run_failing() {
  local name=$1
  shift
  out=$(timeout 60 "$@" 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || fail "$name: exited 0, expected an error: $out"
  [ "$rc" -ne 124 ] || fail "$name: hung (killed after 60 s)"
}

# expect_failure NAME PATTERN CMD...: CMD must exit non-zero within 60 s (no hang) and its
# stderr must contain PATTERN (a fixed string).
expect_failure() {
  local name=$1 pattern=$2
  shift 2
  local out rc=0
  run_failing "$name" "$@"
  grep -qF -- "$pattern" <<<"$out" || fail "$name: message does not mention '$pattern': $out"
  echo "ok: $name (exit $rc)"
}

# expect_agreed_failure NAME PATTERN CMD...: as expect_failure, for an error of rank 0's work that
# every rank agrees on (comm::on_rank0_agreed): exactly one line mentions PATTERN (printed once,
# not by every rank) and nothing says MPI_ABORT (which Open MPI 4.1 can leave hanging while
# another rank is in MPI_Finalize).
expect_agreed_failure() {
  local name=$1 pattern=$2
  shift 2
  local out rc=0
  run_failing "$name" "$@"
  [ "$(grep -cF -- "$pattern" <<<"$out")" -eq 1 ] && ! grep -q "MPI_ABORT" <<<"$out" ||
    fail "$name: expected one line mentioning '$pattern' and no MPI_Abort: $out"
  echo "ok: $name (exit $rc, one error line, no MPI_Abort)"
}

# our_scaletrain_pids: the running processes of this build's scaletrain ($BIN/scaletrain), not
# those of another build or job on the same machine.
our_scaletrain_pids() {
  local p exe
  exe=$(readlink -f "$BIN/scaletrain")
  for p in $(pgrep -x scaletrain || true); do
    [ "$(readlink -f "/proc/$p/exe" 2>/dev/null)" = "$exe" ] && [ "$(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null)" != Z ] &&
      echo "$p"
  done
  return 0
}

# rank_pid R: the pid of MPI rank R's scaletrain process (Open MPI puts the rank in its environment).
rank_pid() {
  local p
  for p in $(our_scaletrain_pids); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$p"
  done
  return 0
}

# no_scaletrain_left: every scaletrain process of this build is gone within 10 s (after a job ended).
no_scaletrain_left() {
  local i
  for i in $(seq 100); do
    [ -n "$(our_scaletrain_pids)" ] || return 0
    sleep 0.1
  done
  fail "scaletrain processes left 10 s after the job ended: $(our_scaletrain_pids)"
}
