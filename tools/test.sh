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
ctest --output-on-failure -R '^unit$'
ctest --output-on-failure -E '^unit$'
