# Sourced by the benchmark scripts: appends one entry to a section of
# bench/results.md, so each figure stays beside its command; and reads a
# run's epoch times (epoch_seconds, below); and checks a simulated epoch
# against a measured one (within_bound); and makes a generated graph with
# its config (generate_graph).
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

# within_bound NAME PREDICTED MEASURED: the simulator's check (issue 13 bounds
# its predictions at 25% of the measured epoch time). Prints why and returns 1
# when the prediction is off by more; the benches record first, then fail.
within_bound() {
  awk -v n="$1" -v p="$2" -v m="$3" 'BEGIN {
    off = 100 * (p - m) / m
    if (off > 25 || off < -25) { printf "%s: the prediction %.2f s is %+.0f%% off the measured %.2f s, outside 25%%\n", n, p, off, m > "/dev/stderr"; exit 1 }
  }'
}

# generate_graph ABG PARTITIONS ENTITIES EDGES KEYS: a graph made by `abg
# generate --direct` (4 relations, seed 3) into data/g of the current folder,
# and its config g.toml: one entity type `node` in PARTITIONS partitions,
# dynamic relations, eval_fraction 0, seed 1, and the top-level TOML lines
# KEYS (checkpoint_path, dimension, epochs, buffer, ...). Exits on failure.
generate_graph() {
  local abg=$1 parts=$2 entities=$3 edges=$4 keys=$5
  cat >g.toml <<TOML
entity_path = "data/g"
edge_paths = ["data/g/train"]
dynamic_relations = true
eval_fraction = 0
seed = 1
$keys
[entities.node]
num_partitions = $parts
[[relations]]
name = "any"
lhs = "node"
rhs = "node"
TOML
  "$abg" generate --direct g.toml --entities "$entities" --edges "$edges" --relations 4 --seed 3 >generate.log 2>&1 ||
    { tail -5 generate.log >&2; exit 1; }
}
