#!/usr/bin/env bash
# The layers of ARCHITECTURE.md, checked on the sources: runtime/ (and the
# public headers) include no CAF header, messages/ nothing from actors/, and
# nothing below tools/ includes tools/; with a build folder, abg-console
# (which attaches while a run trains) loads no LibTorch library. Prints every
# offending line and fails when there is one.
set -euo pipefail
root=${1:?usage: check.sh SOURCE_ROOT [BUILD_DIR]}
build=${2:-}
cd "$root"
status=0
report() { # description, grep output
  if [ -n "$2" ]; then
    echo "layering: $1:"
    echo "$2"
    status=1
  fi
}
report "runtime/ and include/ must not include CAF" \
  "$(grep -rnE '#include\s*[<"]caf/' runtime include || true)"
report "messages/ must not include actors/" \
  "$(grep -rnE '#include\s*"actors/' messages || true)"
report "runtime/, messages/, actors/ and include/ must not include tools/" \
  "$(grep -rnE '#include\s*"tools/' runtime messages actors include || true)"
report "runtime/ must not include messages/ or actors/" \
  "$(grep -rnE '#include\s*"(messages|actors)/' runtime include || true)"
if [ -n "$build" ]; then
  [ -x "$build/abg-console" ] || { echo "layering: no $build/abg-console"; exit 1; }
  report "abg-console must not load LibTorch (tools/console links abg_wire only)" \
    "$(ldd "$build/abg-console" | grep -E 'lib(torch|c10)' || true)"
fi
[ "$status" -eq 0 ] && echo "layering: runtime/, messages/, actors/ and include/ keep to their layers"
exit "$status"
