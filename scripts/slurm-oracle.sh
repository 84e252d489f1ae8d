#!/usr/bin/env bash
# A one-host real Slurm (Debian's slurm-wlm) to compare minihpc against (tests/integration/
# test_slurm_oracle.py): a private munged, slurmctld and slurmd, every file under one folder.
# With SLURM_ORACLE_NODES=N>1, N slurmd on this host, one per node (Slurm's multiple-slurmd
# mode, `slurmd -N NODE`; Debian's slurm-wlm is built with it): nodes HOST-1 .. HOST-N.
#   slurm-oracle.sh start DIR   install slurm-wlm and munge if missing (scripts/host-deps.sh
#                               slurm), write DIR/slurm.conf, start the daemons, wait until
#                               every node is idle; prints SLURM_CONF=DIR/slurm.conf to export
#   slurm-oracle.sh stop DIR    stop the daemons started in DIR (nothing else)
# Settings, each ${VAR:-default}:
#   SLURM_ORACLE_CPUS        CPUs the node claims, more than the machine has if need be
#                            (SlurmdParameters=config_overrides)                     [4]
#   SLURM_ORACLE_CTLD_PORT   slurmctld's port                                        [6817]
#   SLURM_ORACLE_SLURMD_PORT slurmd's port; with N nodes, node i's is this + i - 1   [6818]
#   SLURM_ORACLE_NODES       how many nodes (slurmd); 1 names the node HOST          [1]
#   SLURM_ORACLE_JOBCOMP     job completion records: none, or filetxt (DIR/log/jobcomp.txt)
#                            for `sacct -c`; there is no slurmdbd, so sacct without -c
#                            says "Slurm accounting storage is disabled"             [none]
#   SLURM_ORACLE_TIMEOUT     seconds to wait for the nodes to be idle                [60]
#   SLURM_ORACLE_MIN_JOB_AGE seconds slurmctld keeps an ended job (MinJobAge): 4 or less
#                            keeps sbatch --wait polling every 2s (it backs off to 8s and
#                            32s when MinJobAge allows); read an ended job at once   [4]
# Needs root: slurmd starts each job as its user. Otherwise it stops with one line saying so.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
action=${1:-}
dir=${2:-}
if [ -z "$action" ] || [ -z "$dir" ]; then
    echo "usage: slurm-oracle.sh start|stop DIR" >&2
    exit 2
fi

cpus=${SLURM_ORACLE_CPUS:-4}
ctld_port=${SLURM_ORACLE_CTLD_PORT:-6817}
slurmd_port=${SLURM_ORACLE_SLURMD_PORT:-6818}
timeout=${SLURM_ORACLE_TIMEOUT:-60}
min_job_age=${SLURM_ORACLE_MIN_JOB_AGE:-4}
nodes=${SLURM_ORACLE_NODES:-1}
jobcomp=${SLURM_ORACLE_JOBCOMP:-none}
host=$(hostname -s)
case "$nodes" in
'' | *[!0-9]* | 0*)
    echo "slurm-oracle.sh: SLURM_ORACLE_NODES is '$nodes'; expected a number of nodes, 1 or more" >&2
    exit 2
    ;;
esac
case "$jobcomp" in
none | filetxt) ;;
*)
    echo "slurm-oracle.sh: SLURM_ORACLE_JOBCOMP is '$jobcomp'; expected none or filetxt" >&2
    exit 2
    ;;
esac

# By path: a minihpc venv on PATH has its own sbatch, sinfo and scontrol.
SINFO=/usr/bin/sinfo

stop() {
    # Each daemon by the pid it wrote under DIR (and only while that pid is still that daemon),
    # never by name: other Slurms may run here. All at once (each takes a second or two to go),
    # SIGKILL for any left after 5s.
    local pids=() alive=() name pidfile pid
    for pidfile in "$dir"/run/slurmd*.pid "$dir/run/slurmctld.pid" "$dir/run/munged.pid"; do
        name=$(basename "$pidfile" .pid)
        name=${name%%-*}  # slurmd-NODE.pid: one of several slurmd
        [ -s "$pidfile" ] && pid=$(cat "$pidfile") && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] &&
            kill "$pid" 2>/dev/null && pids+=("$pid")
        rm -f "$pidfile"
    done
    for _ in $(seq 50); do
        alive=()
        for pid in ${pids[@]+"${pids[@]}"}; do
            kill -0 "$pid" 2>/dev/null && alive+=("$pid")
        done
        [ ${#alive[@]} -eq 0 ] && return 0
        sleep 0.1
    done
    kill -9 "${alive[@]}" 2>/dev/null || true
}

names() {
    # The nodes' names, one a line: HOST alone, or HOST-1 .. HOST-N.
    if [ "$nodes" = 1 ]; then
        echo "$host"
    else
        seq -f "$host-%g" "$nodes"
    fi
}

write_conf() {
    # One node: HOST on slurmd's port. Several: one slurmd each (slurmd -N NODE), each on a port
    # of its own, with pid file, log and spool told apart by %n (man slurm.conf, Port).
    local what="one host" pidfile=slurmd.pid logfile=slurmd.log node_lines partition_nodes i
    local jobcomp_lines="JobCompType=jobcomp/none"
    [ "$jobcomp" = none ] || jobcomp_lines="JobCompType=jobcomp/$jobcomp"$'\n'"JobCompLoc=$dir/log/jobcomp.txt"
    node_lines="NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN"
    partition_nodes=$host
    if [ "$nodes" != 1 ]; then
        what="$nodes nodes on one host" pidfile=slurmd-%n.pid logfile=slurmd-%n.log node_lines=""
        for i in $(seq "$nodes"); do
            node_lines+="NodeName=$host-$i NodeHostname=$host NodeAddr=127.0.0.1 Port=$((slurmd_port + i - 1))"
            node_lines+=" CPUs=$cpus State=UNKNOWN"$'\n'
        done
        node_lines=${node_lines%$'\n'}
        partition_nodes="$host-[1-$nodes]"
    fi
    cat > "$dir/slurm.conf" <<EOF
# Written by scripts/slurm-oracle.sh: $what, no accounting, everything under $dir.
ClusterName=oracle
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/run/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/$pidfile
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/$logfile
PlugStackConfig=$dir/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
$jobcomp_lines
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerType=sched/builtin
MinJobAge=$min_job_age
KillWait=5
InactiveLimit=0
$node_lines
PartitionName=oracle Nodes=$partition_nodes Default=YES MaxTime=INFINITE State=UP
EOF
    : > "$dir/plugstack.conf"
}

start() {
    bash "$here/host-deps.sh" slurm
    if [ "$(id -u)" != 0 ]; then
        echo "slurm-oracle.sh: real Slurm's slurmd must run as root; run: sudo $0 start $dir" >&2
        exit 1
    fi
    mkdir -p "$dir"/{run,state,spool,log,munge}
    chmod 700 "$dir" "$dir/munge"
    dir=$(cd "$dir" && pwd)
    stop
    if [ ! -s "$dir/munge/munge.key" ]; then
        head -c 1024 /dev/urandom > "$dir/munge/munge.key"
        chmod 400 "$dir/munge/munge.key"
    fi
    write_conf
    export SLURM_CONF="$dir/slurm.conf"
    /usr/sbin/munged --force --key-file="$dir/munge/munge.key" --socket="$dir/run/munge.socket" \
        --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"
    /usr/sbin/slurmctld -f "$SLURM_CONF"
    local node state="" idle="" what="node $host is"
    if [ "$nodes" = 1 ]; then
        /usr/sbin/slurmd -f "$SLURM_CONF"
    else
        for node in $(names); do
            /usr/sbin/slurmd -f "$SLURM_CONF" -N "$node"
        done
        what="nodes $host-[1-$nodes] are"
    fi
    idle=$(names | sed 's/.*/idle/')  # sinfo -N: a line per node
    for _ in $(seq $((timeout * 5))); do
        state=$("$SINFO" -h -N -o %T 2>/dev/null || true)
        [ "$state" = "$idle" ] && break
        sleep 0.2
    done
    if [ "$state" != "$idle" ]; then
        state=${state//$'\n'/,}
        echo "slurm-oracle.sh: $what '${state:-unreachable}', not idle, after ${timeout}s; see $dir/log/" >&2
        tail -n 5 "$dir"/log/*.log >&2 || true
        stop
        exit 1
    fi
    echo "SLURM_CONF=$SLURM_CONF"
}

case "$action" in
start) start ;;
stop) stop ;;
*)
    echo "slurm-oracle.sh: unknown action '$action' (start or stop)" >&2
    exit 2
    ;;
esac
