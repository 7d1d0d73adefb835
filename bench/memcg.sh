# Sourced by the benchmarks that run abg in a memory cgroup of their own (v1
# memory controller): the checks, a group with a limit, a command run inside
# it, and the figures of the epoch line `abg train` prints.
memcg=/sys/fs/cgroup/memory

# require_memcg NAME: exits unless this is root with the v1 memory controller.
require_memcg() {
  [[ $(id -u) == 0 ]] || { echo "$1: needs root (a memory cgroup of its own)" >&2; exit 1; }
  [[ -f $memcg/memory.limit_in_bytes ]] || { echo "$1: no cgroup v1 memory controller at $memcg" >&2; exit 1; }
}

# make_group GROUP LIMIT_BYTES
make_group() { mkdir "$1" && echo "$2" >"$1/memory.limit_in_bytes"; }

# in_group GROUP COMMAND...: COMMAND inside GROUP (a shell that moves itself in, then becomes COMMAND).
in_group() {
  local group=$1
  shift
  sh -c "echo \$\$ > $group/cgroup.procs && exec \"\$@\"" sh "$@"
}

# epoch_figures LOG: "EDGES SECONDS SWAP_SECONDS" of the first epoch's line
# ("trained E edges in B bucket(s) in S s (...; kernels K s, swapping partitions W s)").
epoch_figures() {
  sed -nE 's/.*epoch 0 .*trained ([0-9]+) edges in [0-9]+ bucket\(s\) in ([0-9.]+) s .*swapping partitions ([0-9.]+) s.*/\1 \2 \3/p' "$1" |
    tail -1
}
