#!/usr/bin/env bash
# The tables of docs/scaling.md: `abg simulate` on graphs that are not
# imported (one entity type, one relation, PBG's defaults at d = 100), at
# 10 and 100 Gbit/s, printed as Markdown rows. Each machine count M gets
# P = 2M partitions (the seed's num_machines <= P/2), at most MAX_PARTITIONS.
#
#   bench/scaling_table.sh ENTITIES EDGES RATE MAX_PARTITIONS MACHINES...
#   e.g. bench/scaling_table.sh 10000000000 1000000000000 1000000 1024 16 64 256 512 1024
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
abg=$root/build/abg
[[ $# -ge 5 ]] || { sed -n '2,7p' "$0" >&2; exit 2; }
entities=$1 edges=$2 rate=$3 max_parts=$4
shift 4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/graph.toml" <<TOML
entity_path = "data"
edge_paths = ["data/train"]
checkpoint_path = "model"
dimension = 100
[entities.node]
num_partitions = 1
[[relations]]
name = "r"
lhs = "node"
rhs = "node"
TOML
cat >"$work/rows.py" <<'PY'
import json, sys
bw, parts = sys.argv[1], sys.argv[2]
def size(b):
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if b >= scale:
            return f"{b / scale:.1f} {unit}"
    return f"{b / 2**10:.1f} KiB"
def duration(s):
    return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.0f} min"
for r in json.load(sys.stdin):
    print(f"| {r['machines']} | {parts} | {bw} | {duration(r['epoch_seconds'])} | {r['speedup']:.1f} | "
          f"{100 * r['idle_fraction']:.0f}% | {size(r['network_bytes_per_machine'])} | "
          f"{size(r['memory_bytes_per_machine'])} | {r['loads']} |")
PY
echo "| machines | partitions | link | epoch | speed-up over 1 machine | trainers idle | network per machine per epoch | memory per machine | partition loads per epoch |"
echo "|---|---|---|---|---|---|---|---|---|"
for bw in 10Gbit 100Gbit; do
  for m in "$@"; do
    parts=$((2 * m > max_parts ? max_parts : 2 * m))
    (cd "$work" && "$abg" simulate graph.toml -p "entities.node.num_partitions=$parts" --entities "$entities" \
      --edges "$edges" --edges-per-second "$rate" --bandwidth "$bw" --machines "$m" --json) |
      python3 "$work/rows.py" "$bw" "$parts"
  done
done
