#!/usr/bin/env bash
# abg's main job, end to end on real data that every Debian machine carries:
#   1. tools/setup.sh: install whatever Debian package is missing, build abg;
#   2. abg debian-graph: the package graph of 'apt-cache dumpavail' as a TSV;
#   3. abg import config/debian-packages.toml: entity dictionaries and buckets;
#   4. abg info config/debian-packages.toml --edges: a summary of the imported
#      graph (edges per relation, highest-degree packages), every bucket verified;
#   5. abg cluster up config/cluster-loopback.toml: training on 99% of the edges
#      by two nodes, separate processes on loopback (127.0.0.1:29610 and 29611),
#      each with a trainer, a partition server and a parameter-server shard;
#   6. abg eval --filtered on the other 1%, abg export of the embeddings as TSV,
#      abg neighbors of a few well-known packages.
# A rerun converts and imports afresh (a couple of seconds).
#
# Usage: tools/main-job.sh
# Works in out/ (ABG_WORK_DIR), where config/debian-packages.toml's relative
# paths land: out/data/debian (entities) and out/data/debian/edges (buckets).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${ABG_BUILD_DIR:-$root/build}
work=${ABG_WORK_DIR:-$root/out}
config="$root/config/debian-packages.toml"

say() { echo "main-job: $*" >&2; }

"$root/tools/setup.sh" abg abg-learn
abg="$build/abg"

# apt-cache dumpavail reads the package lists; a machine that never ran
# 'apt-get update' (or cleaned its lists, as container images do) has none.
if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
  say "no package lists in /var/lib/apt/lists; running apt-get update"
  if [ "$(id -u)" -eq 0 ]; then as_root=(); else as_root=(sudo); fi
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
fi

mkdir -p "$work"
cd "$work"
say "working in $work"

say "converting the Debian package graph"
"$abg" debian-graph --output debian-packages.tsv

# 1% of the edges, chosen by a fixed-seed draw, are held out for evaluation.
say "splitting it into train (99%) and test (1%)"
awk -F'\t' 'BEGIN { srand(1) } { if (rand() < 0.01) print > "debian-test.tsv"; else print > "debian-train.tsv" }' \
  debian-packages.tsv

# Afresh: an entity path imported by an older config may have other partitions.
rm -rf data/debian model/debian
say "importing it with $config"
"$abg" import "$config" debian-train.tsv debian-test.tsv --lhs-col 0 --rel-col 1 --rhs-col 2

say "summary (every bucket file verified)"
"$abg" info "$config" --edges

say "training on the train edges: two nodes on loopback, each one process with one worker"
"$abg" cluster up "$root/config/cluster-loopback.toml" "$config" -p edge_paths=data/debian/train -p workers=1

say "filtered evaluation on the held-out test edges (ranked against every package)"
"$abg" eval "$config" --filtered

say "exporting the embeddings as TSV (PBG's layout)"
"$abg" export "$config" --format tsv --entities-output debian-entities.tsv \
  --relation-types-output debian-relation-types.tsv --force
for pkg in python3 openssh-server; do
  say "nearest neighbours of $pkg (cosine of the embeddings)"
  "$abg" neighbors "$config" "$pkg" --k 5
done
say "what libreoffice most likely depends on (scored under the 'depends' relation)"
"$abg" neighbors "$config" libreoffice --relation depends --k 5
say "done: embeddings in $work/debian-entities.tsv"
