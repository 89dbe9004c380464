#!/bin/bash
# A real Slurm 22.05 cluster of 16 fake nodes x 8 fake GPUs on ONE Debian 12 host, for tests.
# baton's copy of ../shared/recipes/slurm-fake-cluster/run.sh, changed for its tests: failures are
# noticed in seconds (SlurmdTimeout=4), finished jobs stay visible to squeue for 10 minutes
# (MinJobAge), and more commands stop one node's slurmd, kill one node as a real node dies,
# restart one node, and stop, start or restart the controller keeping its state:
#   run.sh stop-node DIR NODE     kill -9 the node's slurmd only (its jobs' processes run on)
#   run.sh kill-node DIR NODE     the node dies: kill -9 its slurmd, its slurmstepds and every
#                                 process they started for jobs there (found by the
#                                 SLURMD_NODENAME=NODE Slurm gives them), all stopped first so
#                                 that none escapes; fails if any survives
#   run.sh start-node DIR NODE | stop-controller DIR | start-controller DIR | restart-controller DIR
# Debian's slurm-wlm is built with --enable-multiple-slurmd, so each node is its own slurmd
# on localhost with its own port. Needs root (mknod for the fake GPU device files).
#
#   run.sh install          apt-get install the packages (slurmctld slurmd slurm-client munge)
#   run.sh start [DIR]      write configs into DIR (default ./slurm-fake), start munged,
#                           slurmctld and 16 slurmd; wait until all nodes are idle
#   run.sh stop  [DIR]      stop every daemon this script started, by the PID files in DIR
#
# Topology: 4 leaf switches (leaf1: n[01-04] ... leaf4: n[13-16]) under one spine.
# Placement without launching:  sbatch --test-only -N4 --gres=gpu:8 --wrap=true
#   -> "sbatch: Job N to start at T using 4 processors on nodes n[05-08] in partition all" (stderr)
set -u
cmd=${1:-}
DIR=$(realpath -m "${2:-./slurm-fake}")
NODES=16
case "$cmd" in
install)
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge
  ;;
start)
  # The ports are fixed: a second cluster's slurmds would register with the first's controller.
  # A controller just stopped gets a few seconds to exit; a zombie awaiting its reaper is gone.
  live_slurmctld() {
    for p in $(pgrep -x slurmctld); do
      sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | grep -qv '^Z' && ps -o pid=,args= -p "$p"
    done
  }
  for _ in $(seq 1 50); do [ -z "$(live_slurmctld)" ] && break; sleep 0.2; done
  if [ -n "$(live_slurmctld)" ]; then
    echo "a slurmctld is already running ($(live_slurmctld | head -1)): one fake cluster per machine" >&2
    exit 1
  fi
  mkdir -p "$DIR"/{state,spool,dev,log}
  cat > "$DIR/slurm.conf" <<CONF
ClusterName=fake
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldPort=6817
SlurmdTimeout=4
SlurmctldTimeout=10
MinJobAge=600
KillWait=5
MessageTimeout=5
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
TopologyPlugin=topology/tree
SchedulerType=sched/backfill
GresTypes=gpu
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=n[01-16] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[17001-17016] CPUs=32 RealMemory=1000 Gres=gpu:h100:8 State=UNKNOWN
PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  cat > "$DIR/topology.conf" <<CONF
SwitchName=leaf1 Nodes=n[01-04]
SwitchName=leaf2 Nodes=n[05-08]
SwitchName=leaf3 Nodes=n[09-12]
SwitchName=leaf4 Nodes=n[13-16]
SwitchName=spine Switches=leaf[1-4]
CONF
  # gres.conf File= must name character devices, or slurmd counts 0 GPUs and drains the node
  for g in 0 1 2 3 4 5 6 7; do [ -e "$DIR/dev/nvidia$g" ] || mknod "$DIR/dev/nvidia$g" c 1 3; done
  printf 'AutoDetect=off\nNodeName=n[01-16] Name=gpu Type=h100 File=%s/dev/nvidia[0-7]\n' "$DIR" > "$DIR/gres.conf"
  mkdir -p /run/munge /var/log/munge /var/lib/munge /etc/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  [ -s /etc/munge/munge.key ] || { dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null; chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key; }
  if ! { [ -f /run/munge/munged.pid ] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; }; then
    runuser -u munge -- /usr/sbin/munged && echo started > "$DIR/munged.ours"
  fi
  export SLURM_CONF="$DIR/slurm.conf"
  /usr/sbin/slurmctld -c -f "$DIR/slurm.conf"
  for i in $(seq -w 1 $NODES); do /usr/sbin/slurmd -f "$DIR/slurm.conf" -N "n$i"; done
  for _ in $(seq 1 60); do
    scontrol update nodename=n[01-16] state=resume >/dev/null 2>&1
    idle=$(sinfo -h -N -t idle -o %N 2>/dev/null | wc -l)
    [ "$idle" -ge $NODES ] && break
    sleep 1
  done
  sinfo -N -o "%N %T %G"
  echo "export SLURM_CONF=$DIR/slurm.conf"
  ;;
stop-node)
  f="$DIR/slurmd-$3.pid"; [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; rm -f "$f"
  ;;
kill-node)
  node=${3:?kill-node DIR NODE}
  # Everything that runs "on" the node: its slurmd, its slurmstepds (they keep slurmd's log open)
  # and what they started for jobs (Slurm 22.05 gives every task and batch script
  # SLURMD_NODENAME=NODE, which a setsid or a new process group keeps), with their descendants.
  # Stopped (SIGSTOP) as found, so that none forks or reaps unseen, until a scan finds nothing
  # new; then all killed -9 at once, with the process groups they lead.
  node_procs() {
    grep -lzx "SLURMD_NODENAME=$node" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3
    find /proc/[0-9]*/fd -lname "$DIR/log/slurmd-$node.log" 2>/dev/null | cut -d/ -f3
    [ -f "$DIR/slurmd-$node.pid" ] && cat "$DIR/slurmd-$node.pid"
  }
  with_descendants() {  # the pids on stdin and every process under them, never init nor this script
    { sed 's/^/want /'; ps -e -o pid=,ppid= | sed 's/^ */ps /'; } |
      awk -v self=$$ '$1 == "want" { want[$2] = 1; next } { parent[$2] = $3 }
        END { delete want[1]; delete want[self]
              do { more = 0
                   for (p in parent)
                     if (!(p in want) && p != self && (parent[p] in want)) { want[p] = 1; more = 1 }
              } while (more)
              for (p in want) if (p in parent) print p }'
  }
  seen=" "
  for _ in $(seq 1 50); do
    new=""
    for p in $(node_procs | with_descendants); do
      case "$seen" in *" $p "*) ;; *) new="$new $p"; seen="$seen$p ";; esac
    done
    [ -z "$new" ] && break
    kill -STOP $new 2>/dev/null
  done
  groups=$(for p in $seen; do ps -o pgid= -p "$p" 2>/dev/null; done | tr -d ' ' | sort -u)
  kill -9 $seen 2>/dev/null
  for g in $groups; do case "$seen" in *" $g "*) kill -9 -- "-$g" 2>/dev/null;; esac; done
  for _ in $(seq 1 50); do
    alive=""
    for p in $seen; do  # a zombie is dead: its parent (init, mostly) has yet to reap it
      sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | grep -qv '^Z' && alive="$alive $p"
    done
    [ -z "$alive" ] && break
    sleep 0.1
  done
  rm -f "$DIR/slurmd-$node.pid"
  [ -z "$alive" ] || { echo "kill-node $node: still alive:$alive" >&2; exit 1; }
  echo "kill-node $node: killed $(echo $seen | wc -w) processes"
  ;;
start-node)
  /usr/sbin/slurmd -f "$DIR/slurm.conf" -N "$3"
  for _ in $(seq 1 30); do
    SLURM_CONF="$DIR/slurm.conf" scontrol update nodename="$3" state=resume >/dev/null 2>&1
    SLURM_CONF="$DIR/slurm.conf" sinfo -h -n "$3" -t idle -o %N | grep -q . && break
    sleep 1
  done
  ;;
restart-controller)
  [ -f "$DIR/slurmctld.pid" ] && kill "$(cat "$DIR/slurmctld.pid")" 2>/dev/null
  for _ in $(seq 1 50); do pgrep -f "slurmctld -c -f $DIR/slurm.conf|slurmctld -f $DIR/slurm.conf" >/dev/null || break; sleep 0.2; done
  /usr/sbin/slurmctld -f "$DIR/slurm.conf"
  ;;
stop-controller)
  [ -f "$DIR/slurmctld.pid" ] && kill "$(cat "$DIR/slurmctld.pid")" 2>/dev/null
  for _ in $(seq 1 50); do pgrep -f "slurmctld -c -f $DIR/slurm.conf|slurmctld -f $DIR/slurm.conf" >/dev/null || break; sleep 0.2; done
  ;;
start-controller)
  /usr/sbin/slurmctld -f "$DIR/slurm.conf"
  ;;
stop)
  for f in "$DIR"/slurmd-n*.pid "$DIR/slurmctld.pid"; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  if [ -f "$DIR/munged.ours" ] && [ -f /run/munge/munged.pid ]; then kill "$(cat /run/munge/munged.pid)" 2>/dev/null; rm -f "$DIR/munged.ours"; fi
  ;;
*) echo "usage: $0 install | start [DIR] | stop [DIR] | stop-node DIR NODE | kill-node DIR NODE | start-node DIR NODE | stop-controller DIR | start-controller DIR | restart-controller DIR"; exit 2;;
esac
