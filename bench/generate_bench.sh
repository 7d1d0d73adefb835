#!/usr/bin/env bash
# Graph generator benchmark: `abg generate` writes a power-law graph to a file
# on local disk (the file fsynced and renamed into place: the time is that of
# a complete file), then the same graph with --direct into a dataset of 16
# partitions, every core generating. Prints the figures and appends them,
# with the commands, to bench/results.md; removes the files afterwards.
#
#   bench/generate_bench.sh [EDGES] [ENTITIES]    (default 100000000 10000000)
#
# Environment: ABG_BENCH_DIR (where the file goes, default /tmp/abg-bench; it
# must be a local disk for the figure to mean "to local disk").
set -euo pipefail
. "$(dirname "$0")/results.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
abg=$root/build/abg
work=${ABG_BENCH_DIR:-/tmp/abg-bench}
edges=${1:-100000000}
entities=${2:-10000000}
results=$root/bench/results.md
[[ -x $abg ]] || { echo "generate_bench: $abg not built (run tools/setup.sh)" >&2; exit 1; }
mkdir -p "$work"
out=$work/generated.tsv
load=$(cut -d' ' -f1 /proc/loadavg)
command=(generate "$out" --entities "$entities" --edges "$edges" --relations 20 --seed 1)
"$abg" "${command[@]}" 2>&1 | tee "$work/generate.log" | tail -1
line=$(grep "abg generate: wrote" "$work/generate.log")
fs=$(df --output=fstype "$work" | tail -1 | tr -d ' ')
rm -f "$out"
entry="- generate: ${line#abg generate: wrote }, file system $fs, load average $load at the start (\`bench/generate_bench.sh $edges $entities\`, $(date +%F))"
append_result "$results" "generate" 'generate (`bench/generate_bench.sh`)' "$entry"
echo "$entry"

rm -rf "$work/direct"
mkdir -p "$work/direct"
cat >"$work/direct/g.toml" <<TOML
entity_path = "data"
edge_paths = ["data/train"]
checkpoint_path = "model"
dimension = 100
dynamic_relations = true
[entities.node]
num_partitions = 16
[[relations]]
name = "any"
lhs = "node"
rhs = "node"
TOML
(cd "$work/direct" && "$abg" generate --direct g.toml --entities "$entities" --edges "$edges" --relations 20 --seed 1) \
  2>&1 | tee "$work/generate.log" | tail -1
line=$(grep "abg generate: wrote" "$work/generate.log")
rm -rf "$work/direct"
entry="- generate --direct: ${line#abg generate: wrote }, 16 partitions, file system $fs (\`bench/generate_bench.sh $edges $entities\`, $(date +%F))"
append_result "$results" "generate" 'generate (`bench/generate_bench.sh`)' "$entry"
echo "$entry"
