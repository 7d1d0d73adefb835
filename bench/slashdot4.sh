# Sourced by the cluster benchmarks (cluster_bench.sh, netns_bench.sh):
# soc-Slashdot0902 in 4 partitions, PBG's defaults, imported once under
# $ABG_BENCH_DIR (default /tmp/abg-bench, shared by both), then training
# overrides and the test split's sampled MRR. The caller sets `name` (for
# messages) before sourcing; this sets root, abg, data, work, epochs,
# results, config, paths, train and edges, and changes into $work.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
abg=$root/build/abg
data=${ABG_DATA:-$root/../shared/data}/soc-Slashdot0902
work=${ABG_BENCH_DIR:-/tmp/abg-bench}
epochs=${ABG_BENCH_EPOCHS:-10}
results=$root/bench/results.md
[[ -x $abg ]] || { echo "$name: $abg not built (run tools/setup.sh)" >&2; exit 1; }
[[ -f $data/train.tsv ]] || { echo "$name: $data/train.tsv not found (set ABG_DATA)" >&2; exit 1; }

config=$root/config/slashdot.toml
paths=(-p "entity_path=data/slashdot4" -p "edge_paths=data/slashdot4/train,data/slashdot4/valid,data/slashdot4/test")
mkdir -p "$work" && cd "$work"
if [[ ! -f data/slashdot4/train/manifest.json ]]; then
  "$abg" import "$config" "${paths[@]}" "$data/train.tsv" "$data/valid.tsv" "$data/test.tsv" \
    --lhs-col 0 --rel-col 1 --rhs-col 2 >/dev/null
fi
# ABG_BENCH_HOGWILD_DELAY overrides PBG's default of 2 s.
train=(-p "edge_paths=data/slashdot4/train" -p "eval_fraction=0" -p "num_epochs=$epochs")
[[ -n ${ABG_BENCH_HOGWILD_DELAY:-} ]] && train+=(-p "hogwild_delay=$ABG_BENCH_HOGWILD_DELAY")
edges=$(wc -l <"$data/train.tsv")

# The test split's sampled MRR of checkpoint MODEL.
mrr() {
  "$abg" eval "$config" "${paths[@]}" -p "checkpoint_path=$1" --edge-path data/slashdot4/test --json 2>/dev/null |
    sed -E 's/.*"mrr": *([0-9.eE+-]+).*/\1/'
}
