# Sourced by the benchmark scripts: appends one entry to a section of
# bench/results.md, so each figure stays beside its command; and reads a
# run's epoch times (epoch_seconds, below).
#
#   append_result RESULTS_FILE SECTION HEADING ENTRY
#
# The entry goes at the end of the first section whose heading starts with
# "## SECTION"; a missing section is made at the end of the file with
# "## HEADING". Blank lines inside the section stay where they are.
append_result() {
  local results=$1 section=$2 heading=$3 entry=$4
  grep -q "^## $section" "$results" || printf '\n## %s\n\n' "$heading" >>"$results"
  awk -v entry="$entry" -v section="## $section" '
    function flush() { for (; blanks > 0; --blanks) print "" }
    /^$/ { ++blanks; next }
    /^## / { if (in_section && !done) { print entry; done = 1 } in_section = (index($0, section) == 1) }
    { flush(); print }
    END { if (!done) print entry; flush() }
  ' "$results" >"$results.tmp" && mv "$results.tmp" "$results"
}

# epoch_seconds CHECKPOINT_DIR: the median seconds of the epochs after the
# first in its training_stats.json (the first alone when it is the only one).
epoch_seconds() {
  python3 - "$1/training_stats.json" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"{statistics.median([r['seconds'] for r in rows[1:]] or [rows[0]['seconds']]):.3f}")
PY
}
