#!/usr/bin/env bash
# Runs every fuzz target (tests/fuzz/*_fuzz.cpp) longer than CI does (which
# gives each 6 s): SECONDS each, default 300. Any crash, sanitizer report,
# hang or allocation over 1 GiB fails it, leaving the input in
# build/fuzz/crashes/ (keep it in tests/fuzz/regressions/TARGET/ once fixed).
# Appends inputs run, inputs per second, edges covered and corpus size per
# target, with the command, to bench/results.md. What grows the corpus stays in
# build/fuzz/corpus/, so each run goes on from the last.
#
#   bench/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
. "$(dirname "$0")/results.sh"
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-300}
shift || true
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
status=0
ABG_FUZZ_SUMMARY=$summary "$root/tests/fuzz/run.sh" "$seconds" "$@" || status=$?
[ -s "$summary" ] || exit $status
load=$(cut -d' ' -f1 /proc/loadavg)
entry="- $(date +%F) fuzzing, $seconds s per target, load average $load (\`bench/fuzz.sh $seconds${*:+ $*}\`)$([ $status = 0 ] || echo ", SOME TARGETS FAILED"):"
while read -r target runs secs cov corpus; do
  line="  - $target: $runs inputs ($((runs / secs))/s), $cov edges covered, corpus of $corpus inputs"
  echo "$line"
  entry+=$'\n'"$line"
done <"$summary"
append_result "$root/bench/results.md" "fuzzing" "fuzzing (\`bench/fuzz.sh\`)" "$entry"
exit $status
