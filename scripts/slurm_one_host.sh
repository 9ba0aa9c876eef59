#!/usr/bin/env bash
# A real one-host SLURM cluster (Debian's slurm-wlm and munge): slurmctld and one slurmd on
# localhost, a partition of this machine's cores, its own munge daemon and ports, everything in
# one folder, so several clusters (two test sessions at once) never meet. Needs root.
#
#   scripts/slurm_one_host.sh install          # apt-get install slurm-wlm munge, if missing
#   scripts/slurm_one_host.sh start [DIR]      # install if missing, start, wait until the node is idle
#   scripts/slurm_one_host.sh stop [DIR]       # cancel its jobs, stop its daemons (DIR keeps the logs)
#   scripts/slurm_one_host.sh status [DIR]     # exit 0 when it answers
#
# DIR defaults to /tmp/rlrun-slurm. `start` prints `export SLURM_CONF=DIR/slurm.conf`: the SLURM
# commands (sbatch, squeue, sinfo, rlrun sweep --executor slurm) talk to this cluster with it set.
# Both `start` and `stop` are idempotent.
set -euo pipefail

action=${1:-}
dir=${2:-/tmp/rlrun-slurm}
conf="$dir/slurm.conf"
node=localhost
partition=debug
start_timeout_s=60

say() { echo "slurm_one_host: $*" >&2; }

install() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    say "slurm-wlm and munge are not installed, and installing them needs root"
    exit 3
  fi
  say "installing slurm-wlm and munge (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
}

alive() { # alive PIDFILE: the process it names runs
  [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

answers() { # the controller answers and the node is idle or running jobs
  alive "$dir/slurmctld.pid" && alive "$dir/slurmd.pid" \
    && SLURM_CONF="$conf" timeout 10 sinfo --noheader --nodes="$node" --format=%t 2>/dev/null \
      | grep -qE '^(idle|mix|alloc)'
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The CPUs this host gives us: nproc would report OMP_NUM_THREADS instead where that is set.
host_cpus() {
  env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc
}

write_conf() {
  local cpus memory_mb
  cpus=$(host_cpus)
  # slurmd refuses a node whose RealMemory exceeds what it finds; leave the OS some room.
  memory_mb=$(awk '/^MemTotal:/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
  cat >"$conf" <<EOF
# Written by scripts/slurm_one_host.sh: a one-host cluster for rlrun's tests.
ClusterName=rlrun$(date +%s)
SlurmctldHost=localhost
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# Its own munge daemon; a requeued job may start again 5 s after its requeue (default 120 s).
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=5
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: processes are tracked by parent pid, and tasks are not bound to cores.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# The node's CPUs and memory as written here, whatever slurmd detects (sockets, threads).
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
# Finished jobs leave squeue after MinJobAge; no accounting database (sacct is not available).
MinJobAge=30
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# SIGKILL 30 s after SIGTERM (SLURM's default, which docs/slurm.md describes): a stopped rlrun
# finishes its step and exits within it even on a loaded machine (5 s killed it mid-exit);
# the controller forgets the node after 60 s of silence.
KillWait=30
SlurmdTimeout=60
InactiveLimit=0
SchedulerType=sched/backfill
MpiDefault=none
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=$partition Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
}

start() {
  install
  if answers; then
    echo "export SLURM_CONF=$conf"
    return 0
  fi
  stop_daemons
  mkdir -p "$dir"/{state,spool,log,munge}
  chmod 700 "$dir" "$dir/munge"
  if [ ! -s "$dir/munge/munge.key" ]; then
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$dir/munge/munge.key"
  fi
  [ -s "$conf" ] || write_conf
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed"
  # -i: ignore a saved state (jobs of an earlier start of this folder). Both daemons fork.
  slurmctld -f "$conf" -i
  slurmd -f "$conf" -N "$node"
  local waited=0
  until answers; do
    # A node that was down (an earlier stop) comes back idle once slurmd registers.
    SLURM_CONF="$conf" scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1 || true
    if [ "$waited" -ge "$start_timeout_s" ]; then
      say "the cluster in $dir did not become ready in ${start_timeout_s}s; see $dir/log/"
      tail -n 5 "$dir"/log/*.log >&2 || true
      exit 1
    fi
    sleep 1
    waited=$((waited + 1))
  done
  say "cluster ready in $dir after ${waited}s (partition $partition: node $node, $(host_cpus) CPUs)"
  echo "export SLURM_CONF=$conf"
}

stop_daemons() {
  local name pid
  for name in slurmd slurmctld munge; do
    if alive "$dir/$name.pid"; then
      pid=$(cat "$dir/$name.pid")
      kill "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$dir/$name.pid"
  done
}

stop() {
  if answers; then
    # Jobs first: their slurmstepd processes outlive slurmd.
    SLURM_CONF="$conf" scancel --full --partition="$partition" || true
    for _ in $(seq 30); do # squeue lists unfinished jobs only
      [ -z "$(SLURM_CONF="$conf" squeue --noheader --format=%i 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  stop_daemons
}

case "$action" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  status) answers ;;
  *)
    echo "usage: $0 install|start|stop|status [DIR]" >&2
    exit 2
    ;;
esac
