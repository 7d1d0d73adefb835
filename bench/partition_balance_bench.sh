#!/usr/bin/env bash
# partition_balance = "entities" (PBG) against "edges" on skewed graphs: a
# generated power-law graph (abg generate, then abg import) in 8 partitions
# and soc-Slashdot0902 in 4. For each: the largest bucket over the mean bucket
# (from the edge manifest), and the time of a training run with 2 trainers
# (num_machines = 2 simulated in one process, 1 worker each, hogwild_delay 0,
# PBG's default model otherwise), per epoch, with the sampled MRR of the last
# split (Slashdot: its test split; generated: a held-out tenth). Prints the
# figures and appends them, with the command, to bench/results.md.
#
#   bench/partition_balance_bench.sh [EDGES] [ENTITIES]   (generated graph; default 5000000 500000)
#
# Environment: ABG_BENCH_EPOCHS (default 3), ABG_BENCH_DIR (default
# /tmp/abg-bench), ABG_DATA (default ../shared/data).
set -euo pipefail
. "$(dirname "$0")/results.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
abg=$root/build/abg
work=${ABG_BENCH_DIR:-/tmp/abg-bench}/balance
edges=${1:-5000000}
entities=${2:-500000}
epochs=${ABG_BENCH_EPOCHS:-3}
slashdot=${ABG_DATA:-$root/../shared/data}/soc-Slashdot0902
results=$root/bench/results.md
[[ -x $abg ]] || { echo "partition_balance_bench: $abg not built (run tools/setup.sh)" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work" && cd "$work"
load=$(cut -d' ' -f1 /proc/loadavg)

config() { # NAME PARTITIONS RELATION
  cat <<TOML
entity_path = "data/$1"
edge_paths = ["data/$1/train", "data/$1/test"]
checkpoint_path = "model/$1"
dimension = 100
num_epochs = $epochs
num_machines = 2
workers = 1
hogwild_delay = 0
eval_fraction = 0
[entities.node]
num_partitions = $2
[[relations]]
name = "$3"
lhs = "node"
rhs = "node"
TOML
}

# Largest bucket / mean bucket of an edge path's manifest.
skew() {
  python3 - "$1/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
b = [x["edges"] for x in m["buckets"]]
cells = m["lhs_partitions"] * m["rhs_partitions"]
print(f"{max(b) / (sum(b) / cells):.2f}")
PY
}

lines=()
record() { echo "$1"; lines+=("$1"); }

run() { # ID LABEL PARTITIONS RELATION TRAIN.tsv TEST.tsv
  local id=$1 graph=$2 parts=$3 relation=$4
  shift 4
  for balance in entities edges; do
    local name=$id-$balance
    config "$name" "$parts" "$relation" >"$name.toml"
    "$abg" import "$name.toml" -p "partition_balance=$balance" "$1" "$2" --lhs-col 0 --rel-col 1 --rhs-col 2 \
      >"$name.import.log" 2>&1 || { tail -20 "$name.import.log" >&2; exit 1; }
    local s
    s=$(skew "data/$name/train")
    /usr/bin/time -f '%e' -o "$name.time" "$abg" train "$name.toml" -p "edge_paths=data/$name/train" >"$name.log" 2>&1 ||
      { tail -20 "$name.log" >&2; exit 1; }
    local t mrr
    t=$(cat "$name.time")
    mrr=$("$abg" eval "$name.toml" --edge-path "data/$name/test" --json 2>/dev/null | sed -E 's/.*"mrr": *([0-9.eE+-]+).*/\1/')
    record "$(printf '%s, %d partitions, partition_balance = "%s": largest bucket %s x the mean; 2 trainers: %.1f s per epoch (%d epochs, %.1f s), sampled MRR %.4f' \
      "$graph" "$parts" "$balance" "$s" "$(awk -v t="$t" -v e="$epochs" 'BEGIN { print t / e }')" "$epochs" "$t" "$mrr")"
  done
}

# The generated graph: every tenth line held out for the MRR.
"$abg" generate gen.tsv --entities "$entities" --edges "$edges" --relations 1 --seed 1 >/dev/null 2>&1
awk 'NR % 10 == 0' gen.tsv >gen-test.tsv
awk 'NR % 10 != 0' gen.tsv >gen-train.tsv
rm gen.tsv
run gen "generated power-law graph ($entities entities, $edges edges)" 8 r0 gen-train.tsv gen-test.tsv
if [[ -f $slashdot/train.tsv ]]; then
  run slashdot soc-Slashdot0902 4 links_to "$slashdot/train.tsv" "$slashdot/test.tsv"
else
  echo "partition_balance_bench: $slashdot/train.tsv not found (set ABG_DATA): Slashdot skipped" >&2
fi

entry=$(printf -- '- %s partition_balance (load average %s, `bench/partition_balance_bench.sh %s %s`):' \
  "$(date -u +%F)" "$load" "$edges" "$entities")
for l in "${lines[@]}"; do entry+=$'\n'"  - $l"; done
append_result "$results" "partition balance" 'partition balance (`bench/partition_balance_bench.sh`)' "$entry"
cd / && rm -rf "$work"
