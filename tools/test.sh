#!/usr/bin/env bash
# Installs whatever Debian package is missing, builds every target in build/
# and runs the whole test suite: the unit tests first, then the end-to-end ones.
# Idempotent and fast when nothing changed (only the tests run again).
#
# Usage: tools/test.sh      (.ci/run runs exactly this)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${ABG_BUILD_DIR:-$root/build}

"$root/tools/setup.sh"

cd "$build"
# Two runs so that the order is fixed (ctest otherwise reorders by past cost
# and failures); the second run takes every test but the unit tests.
#
# On a failure, the failed assertions are printed again at the very end: the
# child processes' logs between them can run to thousands of lines, and CI
# keeps only the head and the tail of the output.
failed_assertions() {
  local log="$build/Testing/Temporary/LastTest.log"
  [ -f "$log" ] || return 0
  echo "==== failed assertions (from $log) ===="
  awk '
    /^TEST CASE: /                  { tc = $0; next }
    / (ERROR|FATAL ERROR): /        { if (tc != "") print tc; tc = ""; print; keep = 1; next }
    keep && /^  (values|logged|  )/ { print; next }
                                    { keep = 0 }
  ' "$log" | head -n 60 || true # head may close the pipe early; the tests' status is what counts
}
for selection in "-R ^unit$" "-E ^unit$"; do
  status=0
  # shellcheck disable=SC2086 # the selection is two words on purpose
  ctest --output-on-failure $selection || status=$?
  [ "$status" -eq 0 ] || { failed_assertions; exit "$status"; }
done
