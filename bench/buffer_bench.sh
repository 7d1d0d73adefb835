#!/usr/bin/env bash
# A partition buffer against everything in memory, on a generated graph that
# fits in memory (abg generate --direct; default 2M entities, 4M edges, 4
# relations, dimension 128: a model of 1.03 GB in 16 partitions): each round
# trains one epoch with every partition in memory, without a memory limit,
# then with buffer_capacity = a quarter of the partitions and
# bucket_order = "buffer" inside a cgroup (v1 memory controller) limited
# below the model's size. Rounds alternate the two; the figure is the median
# edges/s of each and their ratio, with the cgroup's peak
# (memory.max_usage_in_bytes, page cache included) and the time the epochs
# spent swapping partitions. Needs root. Prints the figures and appends them,
# with the command, to bench/results.md.
#
#   sudo bench/buffer_bench.sh [ENTITIES] [EDGES] [LIMIT_MIB]   (default 2000000 4000000 768)
#
# Environment: ABG_BENCH_ROUNDS (default 3), ABG_BENCH_PARTITIONS (default
# 16), ABG_BENCH_DIR (default /tmp/abg-bench).
set -euo pipefail
. "$(dirname "$0")/results.sh"
. "$(dirname "$0")/memcg.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
abg=$root/build/abg
work=${ABG_BENCH_DIR:-/tmp/abg-bench}/buffer
entities=${1:-2000000}
edges=${2:-4000000}
limit_mib=${3:-768}
rounds=${ABG_BENCH_ROUNDS:-3}
parts=${ABG_BENCH_PARTITIONS:-16}
capacity=$((parts / 4 < 2 ? 2 : parts / 4))
results=$root/bench/results.md
[[ -x $abg ]] || { echo "buffer_bench: $abg not built (run tools/setup.sh)" >&2; exit 1; }
require_memcg buffer_bench
rm -rf "$work" && mkdir -p "$work" && cd "$work"
group=$memcg/abg-bench-$$
cleanup() { rmdir "$group" 2>/dev/null || true; cd / && rm -rf "$work"; }
trap cleanup EXIT
load=$(cut -d' ' -f1 /proc/loadavg)

generate_graph "$abg" $parts "$entities" "$edges" "checkpoint_path = \"model/g\"
dimension = 128
num_epochs = 1"
model_mb=$(awk -v n="$entities" 'BEGIN { printf "%.0f", n * 129 * 4 / 1e6 }')
(( limit_mib * 1048576 < model_mb * 1000000 )) ||
  { echo "buffer_bench: the limit ($limit_mib MiB) must be below the model ($model_mb MB)" >&2; exit 1; }

memory_rates=() buffer_rates=() peaks=() swaps_memory=() swaps_buffer=()
for ((r = 1; r <= rounds; ++r)); do
  rm -rf model
  "$abg" train g.toml -p checkpoint_path=model/memory >memory.log 2>&1 || { tail -20 memory.log >&2; exit 1; }
  read -r e s w < <(epoch_figures memory.log)
  memory_rates+=("$(awk -v e="$e" -v s="$s" 'BEGIN { printf "%.0f", e / s }')")
  swaps_memory+=("$w")
  make_group "$group" $((limit_mib * 1048576))
  in_group "$group" "$abg" train g.toml -p checkpoint_path=model/buffer -p buffer_capacity="$capacity" \
    -p bucket_order=buffer >buffer.log 2>&1 || { tail -20 buffer.log >&2; exit 1; }
  peaks+=("$(( $(cat "$group/memory.max_usage_in_bytes") / 1048576 ))")
  rmdir "$group"
  read -r e s w < <(epoch_figures buffer.log)
  buffer_rates+=("$(awk -v e="$e" -v s="$s" 'BEGIN { printf "%.0f", e / s }')")
  swaps_buffer+=("$w")
  echo "round $r: in memory ${memory_rates[-1]} edges/s (swapping ${swaps_memory[-1]} s), buffer ${buffer_rates[-1]} edges/s (swapping ${swaps_buffer[-1]} s, cgroup peak ${peaks[-1]} MiB)"
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
m=$(median "${memory_rates[@]}")
b=$(median "${buffer_rates[@]}")
entry=$(printf -- '- %s generated graph (%s entities, %s edges, dimension 128: a model of %s MB in %s partitions), one epoch, 2 workers, median of %s alternating rounds: all in memory %s edges/s (swapping %s s); buffer_capacity = %s, bucket_order = "buffer", cgroup limit %s MiB: %s edges/s (swapping %s s), %.1f%% of in memory; cgroup peak %s MiB (load average %s, `bench/buffer_bench.sh %s %s %s`)' \
  "$(date -u +%F)" "$entities" "$edges" "$model_mb" "$parts" "$rounds" "$m" "$(median "${swaps_memory[@]}")" \
  "$capacity" "$limit_mib" "$b" "$(median "${swaps_buffer[@]}")" "$(awk -v b="$b" -v m="$m" 'BEGIN { print 100 * b / m }')" \
  "$(median "${peaks[@]}")" "$load" "$entities" "$edges" "$limit_mib")
echo "$entry"
append_result "$results" "partition buffer" 'partition buffer (`bench/buffer_bench.sh`)' "$entry"
