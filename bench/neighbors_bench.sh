#!/usr/bin/env bash
# abg neighbors benchmark: a synthetic checkpoint (build/neighbors_checkpoint:
# ENTITIES entities of dimension DIM, one relation per operator, cos
# comparator) and `abg neighbors` timed end to end, process start to exit,
# checkpoint loading included: once with the checkpoint's and the entity
# path's files evicted from the page cache (posix_fadvise DONTNEED through
# `dd iflag=nocache`: "cold-ish", the disk's speed decides), then REPEAT times
# warm (median and best). The anchor is the last entity name, so the name
# lookup scans every name. Prints one line per run and appends it, with the
# command, to the "## neighbors" section of bench/results.md.
#
#   bench/neighbors_bench.sh [RUN...]   RUN: cosine none diagonal translation linear affine complex_diagonal
#                                       linear-lhs (default: all; OP is --relation OP, ENTITY as the head)
#
# Environment: ABG_BENCH_DIR (default /tmp/abg-neighbors-bench; the checkpoint
# is kept there between runs), ABG_BENCH_ENTITIES (default 1000000),
# ABG_BENCH_DIM (default 100), ABG_BENCH_PARTITIONS (default 1),
# ABG_BENCH_REPEAT (default 5). Measure on a quiet machine: the load average
# at the start is recorded.
set -euo pipefail
. "$(dirname "$0")/results.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
abg=$root/build/abg
gen=$root/build/neighbors_checkpoint
work=${ABG_BENCH_DIR:-/tmp/abg-neighbors-bench}
entities=${ABG_BENCH_ENTITIES:-1000000}
dim=${ABG_BENCH_DIM:-100}
partitions=${ABG_BENCH_PARTITIONS:-1}
repeat=${ABG_BENCH_REPEAT:-5}
results=$root/bench/results.md
for exe in "$abg" "$gen"; do
  [[ -x $exe ]] || { echo "neighbors_bench: $exe not built (cmake --build build --target abg neighbors_checkpoint)" >&2; exit 1; }
done
runs=("$@")
[[ ${#runs[@]} -gt 0 ]] || runs=(cosine none diagonal translation linear affine complex_diagonal linear-lhs)

stamp="$entities $dim $partitions"
if [[ ! -f $work/model/v1/manifest.json || $(cat "$work/stamp" 2>/dev/null) != "$stamp" ]]; then
  start=$(date +%s%N)
  "$gen" --work "$work" --entities "$entities" --dim "$dim" --partitions "$partitions"
  echo "$stamp" >"$work/stamp"
  echo "checkpoint written in $(( ($(date +%s%N) - start) / 1000000 )) ms"
fi
cd "$work"
entity="entity_$((entities - 1))"

evict() {
  local f
  for f in neighbors.toml data/* model/v*/*; do dd if="$f" iflag=nocache count=0 status=none; done
}
# Milliseconds of one run, process start to exit; its stdout goes to $work/out.txt.
run_ms() {
  local start end
  start=$(date +%s%N)
  "$abg" neighbors "$@" >"$work/out.txt" 2>"$work/err.txt" || { cat "$work/err.txt" >&2; exit 1; }
  end=$(date +%s%N)
  echo $(( (end - start) / 1000000 ))
}

for run in "${runs[@]}"; do
  case $run in
    cosine) args=(neighbors.toml "$entity" --k 10) ;;
    none|diagonal|translation|linear|affine|complex_diagonal) args=(neighbors.toml "$entity" --relation "$run" --k 10) ;;
    linear-lhs) args=(neighbors.toml "$entity" --relation linear --side lhs --k 10) ;;
    *) echo "neighbors_bench: unknown run '$run'" >&2; exit 2 ;;
  esac
  load=$(cut -d' ' -f1 /proc/loadavg)
  evict
  cold=$(run_ms "${args[@]}")
  warm=()
  for ((i = 0; i < repeat; ++i)); do warm+=("$(run_ms "${args[@]}")"); done
  sorted=($(printf '%s\n' "${warm[@]}" | sort -n))
  median=${sorted[$((repeat / 2))]}
  best=${sorted[0]}
  [[ $(wc -l <"$work/out.txt") -eq 10 ]] || { echo "neighbors_bench: expected 10 lines from $run" >&2; exit 1; }
  line="neighbors $run: $entities entities, d=$dim, $partitions partition(s), top 10 of '$entity': cold-ish $cold ms, warm median $median ms (best $best, $repeat runs) (load average $load)"
  echo "$line"
  entry=$(printf -- '- %s %s (`bench/neighbors_bench.sh %s`, ABG_BENCH_ENTITIES=%s ABG_BENCH_DIM=%s ABG_BENCH_PARTITIONS=%s)' \
    "$(date -u +%F)" "$line" "$run" "$entities" "$dim" "$partitions")
  append_result "$results" neighbors 'neighbors (`bench/neighbors_bench.sh`)' "$entry"
done
