#!/usr/bin/env bash
# The 1-vs-all kernel's matrix-product speed against one large plain sgemm in
# the same invocation (build/all_negs_gemm: config/fb15k237-sota.toml at
# FB15k-237's shape by default, run from the checkout's root),
# appended with the command to bench/results.md. Measure on a quiet machine.
#
#   bench/all_negs_bench.sh [ARGS...]     (passed to build/all_negs_gemm; --help lists them)
set -euo pipefail
. "$(dirname "$0")/results.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
bench=$root/build/all_negs_gemm
results=$root/bench/results.md
[[ -x $bench ]] || { echo "all_negs_bench: $bench not built (cmake --build build --target all_negs_gemm)" >&2; exit 1; }
load=$(cut -d' ' -f1 /proc/loadavg)
out=$(cd "$root" && "$bench" "$@")
echo "$out"
entry="- $(date +%F) ${out#all_negs_gemm: } (load average $load; \`bench/all_negs_bench.sh$(printf ' %s' "$@")\`)"
append_result "$results" "1-vs-all" '1-vs-all kernel (`bench/all_negs_bench.sh`, `bench/train_bench.sh *-sota`)' "$entry"
