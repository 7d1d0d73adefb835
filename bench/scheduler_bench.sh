#!/usr/bin/env bash
# The lock server's bucket choice on a 4096 x 4096 grid (16.7 M buckets):
# build/scheduler_bench's scenarios (1 and 4 trainers, inside_out and random
# orders, first epoch and later), appended with the command to
# bench/results.md. Measure on a quiet machine.
#
#   bench/scheduler_bench.sh [PARTS] [ACQUIRES]     (default 4096 3000)
set -euo pipefail
. "$(dirname "$0")/results.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
bench=$root/build/scheduler_bench
results=$root/bench/results.md
parts=${1:-4096}
acquires=${2:-3000}
[[ -x $bench ]] || { echo "scheduler_bench: $bench not built (cmake --build build --target scheduler_bench)" >&2; exit 1; }
load=$(cut -d' ' -f1 /proc/loadavg)
out=$("$bench" --parts "$parts" --acquires "$acquires")
echo "$out"
entry="- $(date +%F) load average $load (\`bench/scheduler_bench.sh $parts $acquires\`):"
while IFS= read -r line; do entry+=$'\n'"  - ${line#scheduler: }"; done <<<"$out"
append_result "$results" "scheduler" 'scheduler (`bench/scheduler_bench.sh`)' "$entry"
