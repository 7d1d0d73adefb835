#!/usr/bin/env bash
# Nodes with a partition buffer at P = 2 x nodes, where every partition is
# usually locked by one trainer or another (docs/actors.md, "A reservation
# that awaits"): a generated graph (abg generate --direct; default 2M
# entities, 8M edges, dimension 100: 4 partitions of 202 MB with their
# optimizer state) trained by NODES processes on loopback (abg cluster up;
# PBG's layout, 1 worker each, hogwild_delay 0), buffer_capacity = 4, for
# each abg binary given (default build/abg), the binaries alternating over
# the rounds. Prints, per binary, the median epoch time after the first
# (training_stats.json), the partition loads and those read ahead, and the
# seconds the trainers' kernels waited for partitions (all epochs, all
# trainers); appends them, with the command, to bench/results.md.
#
#   bench/cluster_buffer_bench.sh [ABG...]
#
# Environment: ABG_BENCH_NODES (default 2), ABG_BENCH_ENTITIES (2000000),
# ABG_BENCH_EDGES (8000000), ABG_BENCH_EPOCHS (3), ABG_BENCH_ROUNDS (2),
# ABG_BENCH_DIR (default /tmp/abg-bench), ABG_BENCH_PIN (1: each node is
# started by `abg node` on a core of its own, `taskset -c I` for node I, so
# the nodes do not share cores as machines would not; needs as many cores
# as nodes).
set -euo pipefail
. "$(dirname "$0")/results.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
binaries=("$@")
[[ ${#binaries[@]} -gt 0 ]] || binaries=("$root/build/abg")
nodes=${ABG_BENCH_NODES:-2}
pin=${ABG_BENCH_PIN:-0}
if [[ $pin == 1 ]] && ((nodes > $(nproc))); then
  echo "cluster_buffer_bench: ABG_BENCH_PIN=1 needs a core per node: $nodes nodes, $(nproc) cores" >&2
  exit 1
fi
entities=${ABG_BENCH_ENTITIES:-2000000}
edges=${ABG_BENCH_EDGES:-8000000}
epochs=${ABG_BENCH_EPOCHS:-3}
rounds=${ABG_BENCH_ROUNDS:-2}
parts=$((2 * nodes))
work=${ABG_BENCH_DIR:-/tmp/abg-bench}/clusterbuffer
results=$root/bench/results.md
for i in "${!binaries[@]}"; do
  [[ -x ${binaries[$i]} ]] || { echo "cluster_buffer_bench: ${binaries[$i]} is not an executable (run tools/setup.sh)" >&2; exit 1; }
  binaries[$i]=$(realpath "${binaries[$i]}")  # the runs go on in the bench folder
done
rm -rf "$work" && mkdir -p "$work" && cd "$work"
trap 'cd / && rm -rf "$work"' EXIT
load=$(cut -d' ' -f1 /proc/loadavg)

generate_graph "${binaries[0]}" $parts "$entities" "$edges" "checkpoint_path = \"model/g\"
dimension = 100
num_epochs = $epochs
workers = 1
hogwild_delay = 0
buffer_capacity = 4"

printf '[cluster]\nheartbeat_interval = 1.0\nheartbeat_timeout = 30.0\n' >cluster.toml
for ((i = 0; i < nodes; i++)); do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  roles='"trainer", "partition_server", "parameter_server"'
  ((i == 0)) && roles='"coordinator", "lock_server", '$roles
  printf '\n[[nodes]]\nname = "n%d"\nhost = "127.0.0.1"\nport = %d\nroles = [%s]\n' "$i" "$port" "$roles" >>cluster.toml
done

declare -A epoch_times loads ahead waited
for ((r = 0; r < rounds; r++)); do
  for i in "${!binaries[@]}"; do
    rm -rf model
    if [[ $pin == 1 ]]; then
      pids=()
      for ((n = 0; n < nodes; n++)); do
        taskset -c $n "${binaries[$i]}" node cluster.toml g.toml --name n$n -p checkpoint_path=model/g >"node$n.log" 2>&1 &
        pids+=($!)
      done
      failed=0
      for p in "${pids[@]}"; do wait "$p" || failed=1; done
      cat node*.log >"run$i.$r.log" && rm node*.log
      ((failed == 0)) || { tail -20 "run$i.$r.log" >&2; exit 1; }
    else
      "${binaries[$i]}" cluster up cluster.toml g.toml -p checkpoint_path=model/g >"run$i.$r.log" 2>&1 ||
        { tail -20 "run$i.$r.log" >&2; exit 1; }
    fi
    epoch_times[$i]+="$(epoch_seconds model/g) "
    read -r a m < <(sed -nE 's/.*; ([0-9]+) of ([0-9]+) partition loads read ahead.*/\1 \2/p' "run$i.$r.log" |
      awk '{ a += $1; m += $2 } END { print a + 0, m + 0 }')
    ahead[$i]+="$a "
    loads[$i]+="$m "
    waited[$i]+="$(sed -nE 's/.*swapping partitions ([0-9.]+) s.*/\1/p' "run$i.$r.log" | awk '{ s += $1 } END { printf "%.1f", s }') "
  done
done

median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
lines=()
for i in "${!binaries[@]}"; do
  line=$(printf '%s: median epoch %s s (epochs after the first; rounds: %s), partition loads read ahead per run %s of %s, kernels waiting for partitions %s s per run' \
    "${binaries[$i]}" "$(median <<<"${epoch_times[$i]}")" "${epoch_times[$i]% }" "${ahead[$i]% }" "${loads[$i]% }" "${waited[$i]% }")
  echo "$line"
  lines+=("$line")
done
where="on loopback"
[[ $pin == 1 ]] && where="on loopback, each on a core of its own (taskset)"
entry=$(printf -- '- %s %d nodes %s with a partition buffer (buffer_capacity = 4), %d partitions: generated graph of %d entities, %d edges, dimension 100, %d epochs, 1 worker each, hogwild_delay 0, load average %s (`%sbench/cluster_buffer_bench.sh %s`):' \
  "$(date -u +%F)" "$nodes" "$where" "$parts" "$entities" "$edges" "$epochs" "$load" "$([[ $pin == 1 ]] && echo 'ABG_BENCH_PIN=1 ')" "$*")
for l in "${lines[@]}"; do entry+=$'\n'"  - $l"; done
append_result "$results" cluster "cluster (\`bench/cluster_bench.sh\`, \`bench/netns_bench.sh\`, \`bench/actors/partition_transfer.cpp\`)" "$entry"
