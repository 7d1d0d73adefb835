#!/usr/bin/env bash
# The layers of ARCHITECTURE.md, checked on the sources: runtime/ (and the
# public headers) include no CAF header, messages/ nothing from actors/, and
# nothing below tools/ includes tools/. Prints every offending line and
# fails when there is one.
set -euo pipefail
root=${1:?usage: check.sh SOURCE_ROOT}
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
[ "$status" -eq 0 ] && echo "layering: runtime/, messages/, actors/ and include/ keep to their layers"
exit "$status"
