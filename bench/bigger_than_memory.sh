#!/usr/bin/env bash
# A model bigger than this machine's memory trains one epoch and commits its
# checkpoint: a generated graph (abg generate --direct; default 55M entities
# at dimension 128: 28.4 GB (26.4 GiB) of embeddings and optimizer state, 16
# partitions, 55M edges) trained with buffer_capacity = 4 and
# bucket_order = "buffer" inside a cgroup (v1 memory controller) limited to
# LIMIT_GIB. Reports the epoch (edges/s, time swapping partitions), the
# cgroup's peak (memory.max_usage_in_bytes, page cache included: the mapped
# store's pages fill whatever the limit leaves, so it is the limit), the
# buffer (capacity x the largest partition), the cgroup's anonymous memory at
# its most (memory.stat rss, sampled every 0.2 s: what the page cache cannot
# give back) and the fixed overhead, that minus the buffer; and the disk: the most used at once during the run (free space sampled every 2 s)
# and what is left after it (edges and checkpoint). Needs root and about 1.3x
# the model's size of free disk. Prints the figures and appends them, with
# the command, to bench/results.md.
#
#   sudo bench/bigger_than_memory.sh [ENTITIES] [EDGES] [LIMIT_GIB]   (default 55000000 55000000 10)
#
# Environment: ABG_BENCH_PARTITIONS (default 16), ABG_BENCH_CAPACITY
# (default 4), ABG_BENCH_EPOCHS (default 1), ABG_BENCH_KEEP_VERSIONS
# (checkpoint_keep_versions, default 2 as in PBG's config), ABG_BENCH_EVERY
# (checkpoint_every_buckets, default 0), ABG_BENCH_DIR (default
# /tmp/abg-bench). Over several epochs the disk figure shows what the
# checkpoints keep: with ABG_BENCH_KEEP_VERSIONS=1, at most the store, the
# committed version's files not trained since (linked, so counted once), the
# partitions in flight and the edges; ABG_BENCH_EVERY bounds the partitions
# trained since the last commit.
set -euo pipefail
. "$(dirname "$0")/results.sh"
. "$(dirname "$0")/memcg.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
abg=$root/build/abg
work=${ABG_BENCH_DIR:-/tmp/abg-bench}/bigger
entities=${1:-55000000}
edges=${2:-55000000}
limit_gib=${3:-10}
parts=${ABG_BENCH_PARTITIONS:-16}
capacity=${ABG_BENCH_CAPACITY:-4}
epochs=${ABG_BENCH_EPOCHS:-1}
keep=${ABG_BENCH_KEEP_VERSIONS:-2}
every=${ABG_BENCH_EVERY:-0}
results=$root/bench/results.md
[[ -x $abg ]] || { echo "bigger_than_memory: $abg not built (run tools/setup.sh)" >&2; exit 1; }
require_memcg bigger_than_memory
rm -rf "$work" && mkdir -p "$work" && cd "$work"
group=$memcg/abg-bench-$$
sampler=
rss_sampler=
cleanup() {
  [[ -n $sampler ]] && kill "$sampler" 2>/dev/null || true
  [[ -n $rss_sampler ]] && kill "$rss_sampler" 2>/dev/null || true
  rmdir "$group" 2>/dev/null || true
  cd / && rm -rf "$work"
}
trap cleanup EXIT
load=$(cut -d' ' -f1 /proc/loadavg)
model_bytes=$(awk -v n="$entities" 'BEGIN { printf "%.0f", n * 129 * 4 }')
ram_bytes=$(awk '/MemTotal/ { print $2 * 1024 }' /proc/meminfo)
free_before=$(df -B1 --output=avail "$work" | tail -1)
# The store holds the model; the checkpoint links the store's files (no second
# copy); beside them the edges and the partitions in flight.
need=$((model_bytes * 13 / 10))
(( free_before > need )) ||
  { echo "bigger_than_memory: $((free_before >> 30)) GiB free; needs about $((need >> 30)) GiB" >&2; exit 1; }

generate_graph "$abg" $parts "$entities" "$edges" "checkpoint_path = \"model/g\"
dimension = 128
num_epochs = $epochs
checkpoint_keep_versions = $keep
checkpoint_every_buckets = $every
workers = 2
buffer_capacity = $capacity
bucket_order = \"buffer\""

# The least free space while the run goes, sampled every 2 s.
(min=$free_before; while :; do
   f=$(df -B1 --output=avail "$work" | tail -1); (( f < min )) && min=$f; echo "$min" >min_free; sleep 2
 done) &
sampler=$!
make_group "$group" $((limit_gib << 30))
# The group's anonymous memory at its most, sampled every 0.2 s.
(max=0; while :; do
   r=$(sed -n 's/^rss //p' "$group/memory.stat" 2>/dev/null) || r=0
   (( ${r:-0} > max )) && { max=$r; echo "$max" >max_rss; }; sleep 0.2
 done) &
rss_sampler=$!
start=$(date +%s.%N)
in_group "$group" "$abg" train g.toml >train.log 2>&1 ||
  { tail -20 train.log >&2; exit 1; }
seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }')
peak=$(cat "$group/memory.max_usage_in_bytes")
oom=$(awk '$1 == "oom_kill" { print $2 }' "$group/memory.oom_control")
kill "$rss_sampler" 2>/dev/null || true
rss_sampler=
rmdir "$group"
kill "$sampler" 2>/dev/null || true
sampler=
anon=$(cat max_rss 2>/dev/null || echo 0)
sleep 0.1
most_used=$((free_before - $(cat min_free)))
left=$(du -sb data model | awk '{ s += $1 } END { print s }')
read -r e s w < <(epoch_figures train.log)
largest=$(( (entities + parts - 1) / parts * 129 * 4 ))
buffer=$((capacity * largest))
gb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e9 }'; }
[[ $epochs == 1 ]] && what="one epoch and its checkpoint" || what="$epochs epochs and their checkpoints"
[[ $epochs == 1 ]] && epoch_what="the epoch" || epoch_what="the first epoch"
env_note=
[[ $epochs != 1 || $keep != 2 || $every != 0 ]] && env_note="ABG_BENCH_EPOCHS=$epochs ABG_BENCH_KEEP_VERSIONS=$keep "
[[ $every != 0 ]] && env_note="${env_note}ABG_BENCH_EVERY=$every "
entry=$(printf -- '- %s generated graph (%s entities, %s edges, dimension 128): a model of %s GB (embeddings and optimizer state; this machine has %s GB of memory) in %s partitions, buffer_capacity = %s, bucket_order = "buffer", checkpoint_keep_versions = %s, checkpoint_every_buckets = %s, 2 workers, cgroup limit %s GiB: %s in %s s (%s %s s, %.0f edges/s, swapping partitions %s s; OOM kills %s); cgroup peak %s GB (page cache included); anonymous memory at most %s GB = the buffer (%s x %s GB) + %s GB of fixed overhead; disk: at most %s GB used at once (%.2f x the model), %s GB left after the run (edges and the checkpoint) (load average %s, `%sbench/bigger_than_memory.sh %s %s %s`)' \
  "$(date -u +%F)" "$entities" "$edges" "$(gb "$model_bytes")" "$(gb "$ram_bytes")" "$parts" "$capacity" "$keep" "$every" "$limit_gib" \
  "$what" "$seconds" "$epoch_what" "$s" "$(awk -v e="$e" -v s="$s" 'BEGIN { print e / s }')" "$w" "${oom:-0}" "$(gb "$peak")" "$(gb "$anon")" "$capacity" \
  "$(gb "$largest")" "$(gb $((anon - buffer)))" "$(gb "$most_used")" "$(awk -v u="$most_used" -v m="$model_bytes" 'BEGIN { print u / m }')" \
  "$(gb "$left")" "$load" "$env_note" "$entities" "$edges" "$limit_gib")
echo "$entry"
append_result "$results" "bigger than memory" 'bigger than memory (`bench/bigger_than_memory.sh`)' "$entry"
