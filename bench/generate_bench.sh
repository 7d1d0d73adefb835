#!/usr/bin/env bash
# Graph generator benchmark: `abg generate` writes a power-law graph to a file
# on local disk (the file fsynced and renamed into place: the time is that of
# a complete file), every core generating. Prints the figure and appends it,
# with the command, to bench/results.md; removes the file afterwards.
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
