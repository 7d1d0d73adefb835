#!/usr/bin/env bash
# PBG parity: PyTorch-BigGraph and abg train PBG's FB15k recipe (ComplEx,
# d=400, softmax, 1000 uniform negatives, lr 0.1; config/wn18rr.toml and
# PBG's examples/configs/fb15k_config_cpu.py) on the same splits, and both
# are evaluated the same way (every entity a candidate, filtered by all
# splits) after each of the epochs in ABG_PARITY_EPOCHS. Each cell is the
# median over ABG_PARITY_SEEDS runs. Prints the table and appends it, with
# the command, to bench/results.md.
#
#   bench/pbg_parity.sh [GRAPH...]   GRAPH: wn18rr wn18rr-inverse codexm fb15k237 kinship
#                                    (default: wn18rr wn18rr-inverse codexm fb15k237)
#
# wn18rr-inverse is WN18RR with, for each (h, r, t) of any split, (t, r_inverse, h)
# added to the training split: a WN18-like graph where the inverse of each test
# edge is known. It is made under the work directory, never in the project.
#
# PBG runs on Debian's python3-torch (installed here with apt-get when
# missing, as root). PBG itself is installed over it from a checkout of its
# source, PBG_SRC (`pip install --no-deps --no-build-isolation`), when
# `import torchbiggraph` fails.
#
# Environment: ABG_PARITY_SEEDS (default 3), ABG_PARITY_EPOCHS (default
# 1,2,3,5,10), ABG_BENCH_WORKERS (default 2, both systems), ABG_BENCH_DIR
# (default /tmp/abg-bench; this bench works in its parity/), ABG_DATA
# (default ../shared/data), PBG_SRC. Measure on a quiet machine.
set -euo pipefail
. "$(dirname "$0")/results.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
abg=$root/build/abg
data=${ABG_DATA:-$root/../shared/data}
work=${ABG_BENCH_DIR:-/tmp/abg-bench}/parity
workers=${ABG_BENCH_WORKERS:-2}
seeds=${ABG_PARITY_SEEDS:-3}
epochs=${ABG_PARITY_EPOCHS:-1,2,3,5,10}
results=$root/bench/results.md
python=/usr/bin/python3
[[ -x $abg ]] || { echo "pbg_parity: $abg not built (run tools/setup.sh)" >&2; exit 1; }
[[ $seeds =~ ^[1-9][0-9]*$ ]] || { echo "pbg_parity: ABG_PARITY_SEEDS must be a positive integer, not '$seeds'" >&2; exit 2; }
[[ $epochs =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
  { echo "pbg_parity: ABG_PARITY_EPOCHS must be epoch numbers separated by commas, not '$epochs'" >&2; exit 2; }
last_epoch=$(tr ',' '\n' <<<"$epochs" | sort -n | tail -1)
graphs=("$@")
[[ ${#graphs[@]} -gt 0 ]] || graphs=(wn18rr wn18rr-inverse codexm fb15k237)

# PBG over Debian's LibTorch for Python
if ! "$python" -c 'import torchbiggraph' 2>/dev/null; then
  missing=()
  for p in python3-torch python3-h5py python3-attr python3-tqdm python3-numpy python3-setuptools python3-pip; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    [[ $(id -u) -eq 0 ]] || { echo "pbg_parity: install ${missing[*]} (apt-get, as root) first" >&2; exit 1; }
    apt-get install -y -q "${missing[@]}" >/dev/null
  fi
  [[ -n ${PBG_SRC:-} && -f ${PBG_SRC:-}/setup.py ]] ||
    { echo "pbg_parity: PBG is not installed; set PBG_SRC to a checkout of PyTorch-BigGraph's source" >&2; exit 1; }
  (cd "$PBG_SRC" && "$python" -m pip install -q --no-deps --no-build-isolation --break-system-packages .) >&2
fi

# the graph's TSV splits in $work/$graph/tsv
splits() {
  local graph=$1 dir=$work/$1/tsv src
  case $graph in
    wn18rr | wn18rr-inverse) src=$data/WN18RR ;;
    codexm) src=$data/CoDEx-M ;;
    fb15k237) src=$data/FB15k-237 ;;
    kinship) src=$data/Kinship ;;
    *) echo "pbg_parity: unknown graph '$graph' (expected wn18rr, wn18rr-inverse, codexm, fb15k237, kinship)" >&2
       return 2 ;;
  esac
  [[ -f $src/train.tsv ]] || { echo "pbg_parity: $src/train.tsv not found (set ABG_DATA)" >&2; return 1; }
  [[ -f $dir/test.tsv ]] && return 0
  mkdir -p "$dir"
  if [[ $graph == wn18rr-inverse ]]; then
    { cat "$src/train.tsv"; cat "$src"/{train,valid,test}.tsv | awk -F'\t' -v OFS='\t' '{ print $3, $2 "_inverse", $1 }'; } \
      >"$dir/train.tsv.tmp" && mv "$dir/train.tsv.tmp" "$dir/train.tsv"
  else
    cp "$src/train.tsv" "$dir/train.tsv"
  fi
  cp "$src/valid.tsv" "$dir/valid.tsv" && cp "$src/test.tsv" "$dir/test.tsv"
}

# abg: one run of config/wn18rr.toml (PBG's recipe), every version kept, each asked epoch evaluated
run_abg() {
  local graph=$1 seed=$2 dir=$work/$1
  local paths=(-p "entity_path=$dir/abg-data" -p "edge_paths=$dir/abg-data/train,$dir/abg-data/valid,$dir/abg-data/test"
               -p "checkpoint_path=$dir/abg-model")
  if [[ ! -f $dir/abg-data/train/manifest.json ]]; then
    "$abg" import "$root/config/wn18rr.toml" "${paths[@]}" "$dir"/tsv/{train,valid,test}.tsv \
      --lhs-col 0 --rel-col 1 --rhs-col 2 >"$dir/abg-import.log" 2>&1 || { tail -5 "$dir/abg-import.log" >&2; return 1; }
  fi
  rm -rf "$dir/abg-model"
  local tic=$SECONDS
  "$abg" train "$root/config/wn18rr.toml" "${paths[@]}" -p "edge_paths=$dir/abg-data/train" -p "workers=$workers" \
    -p "seed=$seed" -p "num_epochs=$last_epoch" -p "checkpoint_keep_versions=$last_epoch" \
    >"$dir/abg-$seed.train.log" 2>&1 || { tail -20 "$dir/abg-$seed.train.log" >&2; return 1; }
  echo "abg $seed trained $((SECONDS - tic)) s" >>"$dir/times"
  local k json
  for k in ${epochs//,/ }; do
    json=$("$abg" eval "$root/config/wn18rr.toml" "${paths[@]}" --edge-path "$dir/abg-data/test" --filtered --json \
             --version "$k" 2>>"$dir/abg-$seed.eval.log")
    printf 'abg\t%s\t%s\t%s\n' "$seed" "$k" "$(sed -E 's/.*"mrr": *([0-9.eE+-]+).*/\1/' <<<"$json")" >>"$dir/scores.tsv"
  done
}

run_pbg() {
  local graph=$1 seed=$2 dir=$work/$1
  "$python" "$root/bench/pbg_recipe.py" "$dir/tsv" "$dir/pbg-run" --epochs "$epochs" --seed "$seed" \
    --workers "$workers" >"$dir/pbg-$seed.log" 2>&1 || { tail -20 "$dir/pbg-$seed.log" >&2; return 1; }
  sed -nE 's/^trained [0-9]+ epochs in ([0-9.]+) s$/pbg '"$seed"' trained \1 s/p' "$dir/pbg-$seed.log" >>"$dir/times"
  sed -nE 's/^epoch ([0-9]+): filtered test MRR ([0-9.]+),.*/pbg\t'"$seed"'\t\1\t\2/p' "$dir/pbg-$seed.log" >>"$dir/scores.tsv"
}

load=$(cut -d' ' -f1 /proc/loadavg)
for graph in "${graphs[@]}"; do
  splits "$graph"
  rm -f "$work/$graph/scores.tsv" "$work/$graph/times"
  for ((seed = 1; seed <= seeds; ++seed)); do
    run_abg "$graph" "$seed"
    run_pbg "$graph" "$seed"
  done
  # one row per epoch: the median of each system over the seeds, and abg - PBG
  table=$(awk -F'\t' '
    { v[$1, $3] = v[$1, $3] " " $4; if (!($3 in seen)) { seen[$3] = 1; order[++n] = $3 } }
    function median(list,   a, m, i, j, t) {
      m = split(list, a, " ")
      for (i = 2; i <= m; ++i) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; --j) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
      return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
    }
    END { for (i = 1; i <= n; ++i) { e = order[i]; a = median(v["abg", e]); p = median(v["pbg", e])
          printf "%s%d: abg %.4f, PBG %.4f (%+.4f)", (i > 1 ? "; " : ""), e, a, p, a - p } }' "$work/$graph/scores.tsv")
  times=$(awk '{ s[$1] += $4; ++c[$1] } END { printf "training %.0f s abg, %.0f s PBG (mean of %d runs)", s["abg"] / c["abg"], s["pbg"] / c["pbg"], c["abg"] }' "$work/$graph/times")
  line="$graph, PBG's FB15k recipe, workers = $workers, median filtered test MRR of $seeds seeds after epochs $table; $times (load average $load)"
  echo "$line"
  append_result "$results" "PBG parity" "PBG parity (\`bench/pbg_parity.sh\`)" \
    "- $(date -u +%F) $line (\`bench/pbg_parity.sh $graph\`, ABG_PARITY_SEEDS=$seeds)"
done
