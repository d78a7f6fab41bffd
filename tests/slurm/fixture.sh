#!/usr/bin/env bash
# tests/slurm/fixture.sh start|stop|status: a real single-host Slurm cluster for the job-script tests.
# Owns munged (only if none answers), slurmctld and one slurmd per emulated node (node01..nodeNN)
# on loopback, with all state, logs and PID files under $SLURM_FIXTURE_DIR; no systemd, no cgroups.
# `stop` cancels jobs and stops only the daemons whose PID files it wrote. `start` exits 77 with a
# one-line reason on stderr when Slurm cannot run here (not root, packages or unshare missing, ports
# taken), so a test can skip, and 1 when it is already running or a daemon fails to come up.
# After start: export SLURM_CONF=$SLURM_FIXTURE_DIR/etc/slurm.conf, then sbatch/srun/scontrol.
# Needs root (SlurmUser=root, unshare --uts) and tools/install-deps.sh's slurm and munge packages.
set -euo pipefail

DIR=${SLURM_FIXTURE_DIR:-/tmp/scaletrain-slurm}
NNODES=${SLURM_FIXTURE_NODES:-2}
CPUS=${SLURM_FIXTURE_CPUS_PER_NODE:-2}           # may exceed the real cores (config_overrides)
CTLD_PORT=${SLURM_FIXTURE_CTLD_PORT:-16917}
SLURMD_PORT=${SLURM_FIXTURE_SLURMD_PORT:-17100}  # slurmd i listens on SLURMD_PORT+i
KILL_WAIT=${SLURM_FIXTURE_KILL_WAIT:-5}          # s between SIGTERM and SIGKILL at time limit/scancel
CRED_EXPIRE=${SLURM_FIXTURE_CRED_EXPIRE:-10}     # s; a requeued job waits this +1 s (Slurm: 120, min 5)
SCHED_PARAMS=${SLURM_FIXTURE_SCHED_PARAMS:-sched_interval=1}  # Slurm: 60 s, see SchedulerParameters below
USE_UTS=${SLURM_FIXTURE_UTS:-1}                  # 0: every slurmd keeps the real hostname
export SLURM_CONF=$DIR/etc/slurm.conf

die() { echo "slurm fixture: $*" >&2; exit 1; }
unavailable() { echo "slurm fixture: $*" >&2; exit 77; }
node_names() { for i in $(seq 1 "$NNODES"); do printf 'node%02d\n' "$i"; done; }
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
idle_nodes() { sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l; }

# Everything `start` needs, checked before anything is started; the first gap is the reason.
preflight() {
  local c f p
  [ "$(id -u)" -eq 0 ] || unavailable "needs root (SlurmUser=root and unshare --uts)"
  for c in slurmctld slurmd munged; do
    [ -x "/usr/sbin/$c" ] || unavailable "/usr/sbin/$c missing (run tools/install-deps.sh)"
  done
  for c in sinfo scontrol munge unmunge mungekey unshare runuser; do
    command -v "$c" >/dev/null || unavailable "$c not found (run tools/install-deps.sh)"
  done
  # Slurm's pmix plugin dlopens the unversioned libpmix.so, which only libpmix-dev ships.
  ldconfig -p | grep 'libpmix\.so ' >/dev/null || unavailable "libpmix.so missing (install libpmix-dev)"
  if [ "$USE_UTS" = 1 ]; then
    unshare --uts true 2>/dev/null || unavailable "unshare --uts not permitted here (SLURM_FIXTURE_UTS=0 to skip it)"
  fi
  for f in "$DIR"/run/*.pid; do alive "$f" && die "already running ($f); run '$0 stop' first"; done
  for p in "$CTLD_PORT" $(seq $((SLURMD_PORT + 1)) $((SLURMD_PORT + NNODES))); do
    port_busy "$p" && unavailable "port $p on 127.0.0.1 is in use (set SLURM_FIXTURE_CTLD_PORT/SLURMD_PORT)"
  done
  return 0
}

write_conf() {
  local i n
  mkdir -p "$DIR"/{etc,log,run,state/ctld}
  cat > "$SLURM_CONF" <<EOF
# Written by tests/slurm/fixture.sh; regenerated on every start.
ClusterName=scaletrain-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire also sets how long a requeued job is held: BeginTime = requeue time + cred_expire + 1.
AuthInfo=cred_expire=$CRED_EXPIRE
StateSaveLocation=$DIR/state/ctld
# %n: several slurmd on one host need their own spool, pid and log paths.
SlurmdSpoolDir=$DIR/state/slurmd_%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd_%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd_%n.log
SlurmctldDebug=info
SlurmdDebug=info
# Per-node TmpFS: mpi/pmix creates spmix_appdir_* there; a shared /tmp makes the second node's
# step fail with "File exists".
TmpFS=$DIR/tmp/%n
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# A job whose BeginTime passes (a requeued one) is not an event: it waits for the main scheduler's
# periodic full pass (sched_interval, 60 s) or an unrelated change that wakes the backfill pass.
SchedulerParameters=$SCHED_PARAMS
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
# Finished jobs stay visible to "scontrol show job" for an hour (there is no sacct here).
MinJobAge=3600
KillWait=$KILL_WAIT
JobRequeue=1
InactiveLimit=0
SlurmdTimeout=60
SlurmctldTimeout=60
EOF
  for i in $(seq 1 "$NNODES"); do
    n=$(printf 'node%02d' "$i")
    echo "NodeName=$n NodeHostname=$n NodeAddr=127.0.0.1 Port=$((SLURMD_PORT + i)) CPUs=$CPUS State=UNKNOWN" >> "$SLURM_CONF"
    mkdir -p "$DIR/state/slurmd_$n" "$DIR/tmp/$n"
  done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >> "$SLURM_CONF"
}

start_munge() {
  local i
  munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0   # reuse a working munged
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
  fi
  install -d -o munge -g munge -m 0755 /run/munge
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid || return 1
  cp /run/munge/munged.pid "$DIR/run/munged.pid"   # marks "we started it" for stop
  for i in $(seq 50); do munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}

# fail_start REASON: undo a partial start, then die with REASON.
fail_start() { stop >/dev/null 2>&1 || true; die "$*"; }

start() {
  local t0 n i
  t0=$(date +%s%N)
  preflight
  rm -rf "$DIR/state" "$DIR/tmp" "$DIR/log"
  write_conf
  start_munge || fail_start "munged did not start"
  /usr/sbin/slurmctld -f "$SLURM_CONF" || fail_start "slurmctld failed (see $DIR/log/slurmctld.log)"
  for i in $(seq 100); do scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.1; done
  scontrol ping 2>/dev/null | grep -q 'is UP' || fail_start "slurmctld not answering (see $DIR/log/slurmctld.log)"
  for n in $(node_names); do
    # Own UTS namespace per slurmd, so each emulated node has its own hostname: otherwise Open MPI's
    # shared-memory transport of two "nodes" on one host collides and crashes.
    if [ "$USE_UTS" = 1 ]; then
      unshare --uts sh -c "hostname $n && exec /usr/sbin/slurmd -f '$SLURM_CONF' -N $n" \
        || fail_start "slurmd $n failed (see $DIR/log/slurmd_$n.log)"
    else
      /usr/sbin/slurmd -f "$SLURM_CONF" -N "$n" || fail_start "slurmd $n failed (see $DIR/log/slurmd_$n.log)"
    fi
  done
  for i in $(seq 300); do [ "$(idle_nodes)" -eq "$NNODES" ] && break; sleep 0.1; done
  [ "$(idle_nodes)" -eq "$NNODES" ] || fail_start "only $(idle_nodes) of $NNODES nodes idle after 30 s (see $DIR/log)"
  echo "slurm fixture: $NNODES nodes x $CPUS CPUs up in $(( ($(date +%s%N) - t0) / 1000000 )) ms; export SLURM_CONF=$SLURM_CONF"
}

# stop_pids PIDFILE...: TERM all, wait up to 10 s each, then KILL. Only PIDs this script recorded.
stop_pids() {
  local f pid i pids=()
  for f in "$@"; do
    [ -s "$f" ] || continue
    pid=$(cat "$f"); rm -f "$f"
    kill -0 "$pid" 2>/dev/null && { kill -TERM "$pid"; pids+=("$pid"); }
  done
  for pid in ${pids[@]+"${pids[@]}"}; do
    for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then echo "slurm fixture: pid $pid ignored TERM, sending KILL" >&2; kill -KILL "$pid"; fi
  done
}

stop() {
  local i
  if [ -f "$SLURM_CONF" ] && scontrol ping 2>/dev/null | grep -q 'is UP'; then
    squeue -h -o %i | xargs -r scancel || true
    # let slurmstepd finish (KillWait) before their slurmd goes away
    for i in $(seq $(( (KILL_WAIT + 10) * 10 ))); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.1; done
  fi
  stop_pids "$DIR"/run/slurmd_*.pid
  stop_pids "$DIR/run/slurmctld.pid" "$DIR/run/munged.pid"   # munged.pid only if we started it
  echo "slurm fixture: stopped"
}

status() {
  local f up=0
  for f in "$DIR"/run/*.pid; do
    [ -e "$f" ] || continue
    if alive "$f"; then echo "$f: $(cat "$f") running"; up=1; else echo "$f: $(cat "$f") dead"; fi
  done
  [ "$up" = 1 ] || { echo "slurm fixture: not running ($DIR)"; return 1; }
  sinfo -N 2>/dev/null || true
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
