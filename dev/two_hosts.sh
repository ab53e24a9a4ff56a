#!/bin/sh
# dev/two_hosts.sh: two hosts on one machine, for data parallel over a network: network namespaces
# bp-host0 and bp-host1 (each its own host name), joined by a veth pair (interface bpnet on each
# side, 10.77.0.1 and 10.77.0.2), the link shaped by tc's token bucket (tbf) to RATE each way.
# Traffic stays inside the machine. Only a bandwidth is shaped: this kernel has no netem, so the
# link's latency is the veth's own (a few microseconds); a model that wants another says so.
#
#   dev/two_hosts.sh up RATE        make the hosts and the link (root; RATE as tc takes it: 10gbit)
#   dev/two_hosts.sh run CMD...     run CMD on host 0, where mpirun finds host 1 through the host
#                                   file $HOSTS and the launch agent below (dev/two_hosts.sh agent)
#   dev/two_hosts.sh down           remove them
#   dev/two_hosts.sh overlap RATE   up, the overlap measurement of dev/notes.md, down
#
# Under `run`, mpirun reads its options from the environment: the host file, TCP alone between the
# hosts (no shared memory: the ranks are on one machine, and Open MPI would use it), the hosts'
# subnet for its own connections and the ranks', and this script as its launch agent in place of
# ssh (`agent HOST CMD`: CMD in HOST's namespace, under that host's name). So a benchmark's command
# is the same as on one host, with --hostfile: bench_run passes it on (bench_run --hostfile).
#
# What `up` makes is removed again if it fails half way (a RATE tc refuses) or is interrupted, and
# `overlap` removes it however it ends (Ctrl-C included: dash runs no EXIT trap on a signal, so each
# signal exits, which runs it). The host file is this script's own: it starts with MARK, and a file
# at $HOSTS that does not (or is not a regular file) is neither overwritten nor removed.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
HOSTS=${HOSTS:-/tmp/backprop-bench-two-hosts}
MARK="# host file of dev/two_hosts.sh"
ns_of() { case "$1" in 10.77.0.1) echo bp-host0 ;; 10.77.0.2) echo bp-host1 ;; *) echo "$1" ;; esac; }
ours() { [ -f "$HOSTS" ] && [ ! -L "$HOSTS" ] && [ "$(head -n 1 "$HOSTS")" = "$MARK" ]; }
on_signals_exit() { trap 'exit 130' INT; trap 'exit 143' TERM; trap 'exit 129' HUP; }

up() {
  rate=$1
  if [ -e "$HOSTS" ] || [ -L "$HOSTS" ]; then
    ours || { echo "two_hosts.sh: $HOSTS exists and is not this script's host file;" \
                   "set HOSTS to another path" >&2; exit 2; }
  fi
  down 2>/dev/null || true
  trap 'down 2>/dev/null' EXIT  # until the link is whole
  on_signals_exit
  for ns in bp-host0 bp-host1; do ip netns add $ns; ip -n $ns link set lo up; done
  ip link add bpveth0 type veth peer name bpveth1
  ip link set bpveth0 netns bp-host0
  ip link set bpveth1 netns bp-host1
  i=1
  for ns in bp-host0 bp-host1; do
    ip -n $ns link set bpveth$((i - 1)) name bpnet
    ip -n $ns addr add 10.77.0.$i/24 dev bpnet
    ip -n $ns link set bpnet up
    # a bucket of 4 MB: at 10 Gb/s the kernel refills it every 3 ms, more often than that
    ip netns exec $ns tc qdisc add dev bpnet root tbf rate "$rate" burst 4mb latency 50ms
    i=$((i + 1))
  done
  (set -C; printf '%s\n10.77.0.1 slots=1\n10.77.0.2 slots=1\n' "$MARK" > "$HOSTS")
  trap - EXIT
}

down() {
  for ns in bp-host0 bp-host1; do ip netns del $ns 2>/dev/null || true; done
  if ours; then rm -f "$HOSTS"; fi
}

run() {
  export OMPI_MCA_orte_default_hostfile="$HOSTS" OMPI_MCA_btl=tcp,self \
    OMPI_MCA_btl_tcp_if_include=10.77.0.0/24 OMPI_MCA_oob_tcp_if_include=10.77.0.0/24 \
    OMPI_MCA_plm_rsh_agent="$HERE/two_hosts.sh agent" OMPI_MCA_plm_rsh_no_tree_spawn=1 \
    GLOO_SOCKET_IFNAME=bpnet
  exec ip netns exec bp-host0 unshare --uts sh -c 'hostname bp-host0; exec "$@"' sh "$@"
}

agent() {  # what mpirun runs for ssh: HOST then a shell command
  host=$1
  shift
  ns=$(ns_of "$host")
  exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns; $*"
}

# Weak scaling (each rank the whole batch, so that one process on one host computes what a rank
# does): the step alone, then 2 ranks on the two hosts with the gradients summed under the
# backward and after it. hidden = (after - under) / (after - alone): the share of the
# communication the overlap hides.
overlap() {
  rate=$1
  BUILD=${BUILD:-build}
  up "$rate"
  trap down EXIT
  on_signals_exit
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  step() { grep -o 'step/[^ ]*  *[0-9.]* us' | awk '{print $2 / 1000}'; }
  echo "link $rate each way, 2 hosts of 1 rank, weak scaling, ms a step (median of 5 runs of 20):"
  printf '%-28s %8s %8s %8s %8s\n' instance alone under after hidden
  for w in workload=char_mlp,size=1024 workload=mlp_width,size=2048 \
           workload=mini_gpt_wide,size=32; do
    a=$("$BUILD/bench_engine" --instance=$w --benchmark_repetitions=5 \
        --benchmark_report_aggregates_only=true 2>/dev/null | grep _median | step)
    for o in on off; do
      eval "t_$o=\$(run mpirun -n 2 --hostfile $HOSTS $BUILD/bench_ranks --ranks=2 --scaling=weak \
        --overlap=$o --instance=$w --benchmark_repetitions=5 \
        --benchmark_report_aggregates_only=true --benchmark_color=false 2>/dev/null | grep _median | step)"
    done
    printf '%-28s %8.2f %8.2f %8.2f %7.0f%%\n' "${w#workload=}" "$a" "$t_on" "$t_off" \
      "$(echo "($t_off - $t_on) / ($t_off - $a) * 100" | bc -l)"
  done
}

case "${1:-}" in
  up) up "$2" ;;
  overlap) overlap "$2" ;;
  down) down ;;
  run) shift; run "$@" ;;
  agent) shift; agent "$@" ;;
  *) echo "usage: dev/two_hosts.sh up RATE | run CMD... | down | agent HOST CMD" >&2; exit 2 ;;
esac
