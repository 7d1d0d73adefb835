#!/usr/bin/env bash
# Builds the fuzz targets (tests/fuzz/*_fuzz.cpp) with clang-16, libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer in BUILD/fuzz, and runs each
# for SECONDS: first over its regression cases (tests/fuzz/regressions/TARGET,
# inputs that once found a bug), then fuzzing from seeds it writes itself with
# abg's own writers (valid inputs of the current formats) plus what earlier
# runs here found (BUILD/fuzz/corpus/TARGET). A crash, sanitizer report, hang
# (-timeout), allocation over -malloc_limit_mb or leak fails the run; the
# input that did it is left in BUILD/fuzz/crashes/ (add it to regressions/).
#
# Usage: tests/fuzz/run.sh [SECONDS] [TARGET...]   (SECONDS default 6: CI's bound)
# Environment: ABG_BUILD_DIR (default build/), ABG_JOBS (default nproc),
# ABG_FUZZ_SUMMARY (a file that gets one line per target: name, inputs run,
# seconds, edges covered, corpus size; bench/fuzz.sh reads it).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${ABG_BUILD_DIR:-$root/build}/fuzz
jobs=${ABG_JOBS:-$(nproc 2>/dev/null || echo 2)}
seconds=${1:-6}
shift || true

say() { echo "fuzz: $*" >&2; }

command -v clang++-16 >/dev/null || { say "clang++-16 is missing: run tools/setup.sh (it installs clang-16)"; exit 1; }
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang-16 CXX=clang++-16 cmake -S "$root/tests/fuzz" -B "$build" -G Ninja >/dev/null
fi
cmake --build "$build" --parallel "$jobs"

mapfile -t targets < <(if [ $# -gt 0 ]; then printf '%s\n' "$@"; else
  cd "$root/tests/fuzz" && ls ./*_fuzz.cpp | sed 's|^\./||; s|\.cpp$||'; fi)

mkdir -p "$build/crashes"
export UBSAN_OPTIONS=print_stacktrace=1
# Stack traces with names where an llvm-symbolizer is installed (not needed).
symbolizer=$(command -v llvm-symbolizer-16 llvm-symbolizer 2>/dev/null | head -1 || true)
[ -z "$symbolizer" ] || export ASAN_SYMBOLIZER_PATH=$symbolizer
failed=()
for t in "${targets[@]}"; do
  exe="$build/$t"
  [ -x "$exe" ] || { say "no target $t"; exit 1; }
  seeds="$build/seeds/$t"
  rm -rf "$seeds" && mkdir -p "$seeds" "$build/corpus/$t"
  ABG_FUZZ_SEEDS="$seeds" "$exe" >/dev/null 2>&1 || { say "$t could not write its seeds"; failed+=("$t"); continue; }
  flags=(-rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 -max_len=65536
         -artifact_prefix="$build/crashes/$t-" -print_final_stats=1)
  log="$build/$t.log"
  ok=1
  regressions="$root/tests/fuzz/regressions/$t"
  if [ -d "$regressions" ] && [ -n "$(ls -A "$regressions")" ]; then
    "$exe" "${flags[@]}" "$regressions"/* >"$log" 2>&1 || ok=0
  fi
  if [ $ok = 1 ]; then
    "$exe" "${flags[@]}" -max_total_time="$seconds" "$build/corpus/$t" "$seeds" >"$log" 2>&1 || ok=0
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  if [ $ok = 1 ] && [ -n "${ABG_FUZZ_SUMMARY:-}" ]; then
    echo "$t ${runs:-0} $seconds ${cov#cov: } $(ls "$build/corpus/$t" | wc -l)" >>"$ABG_FUZZ_SUMMARY"
  fi
  if [ $ok = 1 ]; then
    say "$t: ${runs:-?} inputs in ${seconds} s, ${cov:-cov: ?} edges covered: ok"
  else
    say "$t FAILED (log: $log)"
    grep -m1 -A25 'ERROR:\|runtime error\|==ERROR\|deadly signal\|Timeout\|out-of-memory\|malloc limit' "$log" >&2 || tail -30 "$log" >&2
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  say "failed: ${failed[*]}"
  exit 1
fi
say "all ${#targets[@]} target(s) passed"
