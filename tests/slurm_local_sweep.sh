#!/usr/bin/env bash
# For tests/slurm_sweep_test.cpp: a one-node Slurm cluster of its own under WORK (munged, slurmctld and slurmd on
# private sockets, ports and state folders, so that nothing of the host's is touched), then
# tools/slurm/submit.sh SWEEP N WORK/out with LCSIM as the binary, waiting up to TIMEOUT seconds for the merge job.
# Every daemon it starts is stopped on exit. Needs root and Debian's slurm-wlm and munge
# (tools/setup.sh --with-slurm).
# Usage: tests/slurm_local_sweep.sh WORK LCSIM SWEEP N [TIMEOUT]
set -euo pipefail

work="$1" lcsim="$2" sweep="$3" n="$4" timeout="${5:-120}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mkdir -p "$work/state" "$work/spool"
pids=()
stop() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop EXIT
fail() {
  echo "slurm_local_sweep: $*" >&2
  for log in "$work"/*.log; do
    echo "--- $log" >&2
    tail -n 20 "$log" >&2
  done
  exit 1
}

dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none
chmod 600 "$work/munge.key"
munged --foreground --force --key-file="$work/munge.key" --socket="$work/munge.socket" \
  --pid-file="$work/munged.pid" --log-file="$work/munged.log" --seed-file="$work/munged.seed" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 50); do [[ -S "$work/munge.socket" ]] && break; sleep 0.1; done
munge --socket="$work/munge.socket" --no-input | unmunge --socket="$work/munge.socket" >/dev/null ||
  fail "munged does not answer"

host="$(hostname -s)"
cat >"$work/slurm.conf" <<CONF
ClusterName=lcsimtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$work/munge.socket
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=lcsim Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$work/slurm.conf"

# In the foreground (-D) so that their ids are ours to stop; they log to the files slurm.conf names.
slurmctld -D -i -f "$SLURM_CONF" >/dev/null 2>&1 &
pids+=($!)
slurmd -D -N localhost -f "$SLURM_CONF" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 60); do
  [[ "$(sinfo -h -n localhost -o %t 2>/dev/null)" == idle ]] && break
  sleep 0.5
done
[[ "$(sinfo -h -n localhost -o %t 2>/dev/null)" == idle ]] || fail "the node is not idle after 30 s"

submitted="$(LCSIM="$lcsim" "$root/tools/slurm/submit.sh" "$sweep" "$n" "$work/out")"
echo "$submitted"
array="$(sed -n 's/^array job \([0-9]*\) .*/\1/p' <<<"$submitted")"
merge="$(sed -n 's/.*merge job \([0-9]*\):.*/\1/p' <<<"$submitted")"
[[ -n "$array" && -n "$merge" ]] || fail "cannot read the job ids from: $submitted"
# The merge runs after every array task, whatever their outcome (afterany): its end is the sweep's.
state=""
for ((waited = 0; waited < timeout * 2; waited++)); do
  state="$(scontrol show job "$merge" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')"
  case "$state" in
    COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE) break ;;
  esac
  sleep 0.5
done
echo "merge job $merge: ${state:-unknown}"
# The node is idle again once the jobs' step daemons (slurmstepd) have ended: stop slurmd only then, so that none
# outlives the test.
for _ in $(seq 60); do
  [[ "$(sinfo -h -n localhost -o %t 2>/dev/null)" == idle ]] && break
  sleep 0.5
done
case "$state" in
  COMPLETED | FAILED) ;;
  *) fail "merge job $merge not done after $timeout s (state ${state:-unknown})" ;;
esac
