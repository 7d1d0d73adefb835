#!/usr/bin/env bash
# Training benchmark: the whole `abg train` run timed from a fresh checkpoint
# directory (start-up and checkpoints included), its peak RSS, then the test
# split's MRR / Hits@1 / Hits@3 / Hits@10 (sampled ranking for Slashdot as PBG's
# torchbiggraph_eval, filtered for WN18RR and FB15k-237). Prints one line per
# run and appends it, with the command, to bench/results.md.
#
#   bench/train_bench.sh RUN...     RUN: slashdot1 slashdot4 wn18rr fb15k237
#                                        wn18rr-tuned fb15k237-tuned wn18rr-sota fb15k237-sota
#                                        codexm-wn18rr-sota codexm-fb15k237-sota
#
# wn18rr and fb15k237 train PBG's FB15k recipe (config/wn18rr.toml,
# config/fb15k237.toml); the -tuned runs train config/*-tuned.toml, the
# -sota runs config/*-sota.toml; the codexm- runs train the named config on
# CoDEx-M (CoDEx's published ComplEx: filtered test MRR 0.337).
#
# Environment: ABG_BENCH_WORKERS (default 2), ABG_BENCH_EPOCHS (default: the
# config's num_epochs), ABG_BENCH_DIR (work directory, default /tmp/abg-bench; the
# imports are kept there between runs), ABG_DATA (default ../shared/data),
# ABG_BENCH_AVERAGE=K (after training, `abg average --last K`: the model
# evaluated is the mean of the last K epochs, and its time is counted in).
# Measure on a quiet machine: the load average at the start is recorded.
set -euo pipefail
. "$(dirname "$0")/results.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
abg=$root/build/abg
data=${ABG_DATA:-$root/../shared/data}
work=${ABG_BENCH_DIR:-/tmp/abg-bench}
workers=${ABG_BENCH_WORKERS:-2}
results=$root/bench/results.md
[[ -x $abg ]] || { echo "train_bench: $abg not built (run tools/setup.sh)" >&2; exit 1; }
[[ $# -gt 0 ]] || { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

for run in "$@"; do
  case $run in
    slashdot1) config=slashdot.toml dataset=soc-Slashdot0902 name=slashdot1 eval_mode=sampled
               extra=(-p entities.node.num_partitions=1) ;;
    slashdot4) config=slashdot.toml dataset=soc-Slashdot0902 name=slashdot4 eval_mode=sampled extra=() ;;
    wn18rr | wn18rr-tuned | wn18rr-sota) config=$run.toml dataset=WN18RR name=$run eval_mode=filtered extra=() ;;
    fb15k237 | fb15k237-tuned | fb15k237-sota) config=$run.toml dataset=FB15k-237 name=$run eval_mode=filtered extra=() ;;
    codexm-wn18rr-sota | codexm-fb15k237-sota)
               config=${run#codexm-}.toml dataset=CoDEx-M name=$run eval_mode=filtered extra=() ;;
    *) echo "train_bench: unknown run '$run' (expected slashdot1, slashdot4, wn18rr, fb15k237, wn18rr-tuned," \
            "fb15k237-tuned, wn18rr-sota, fb15k237-sota," \
            "codexm-wn18rr-sota, codexm-fb15k237-sota)" >&2; exit 2 ;;
  esac
  # the import is named by the run without -tuned or -sota: wn18rr-sota trains on
  # wn18rr's import, codexm-wn18rr-sota on its own codexm-wn18rr
  imported=${name%-tuned}
  imported=${imported%-sota}
  src=$data/$dataset
  [[ -f $src/train.tsv ]] || { echo "train_bench: $src/train.tsv not found (set ABG_DATA)" >&2; exit 1; }
  # each run has its own entity, edge and checkpoint directories under $work
  paths=(-p "entity_path=data/$imported" -p "edge_paths=data/$imported/train,data/$imported/valid,data/$imported/test"
         -p "checkpoint_path=model/$name")
  mkdir -p "$work" && cd "$work"
  if [[ ! -f data/$imported/train/manifest.json ]]; then
    "$abg" import "$root/config/$config" "${extra[@]}" "${paths[@]}" \
      "$src/train.tsv" "$src/valid.tsv" "$src/test.tsv" --lhs-col 0 --rel-col 1 --rhs-col 2 >/dev/null
  fi
  rm -rf "model/$name"
  # Every edge of the train split is trained (no eval_fraction hold-out), as
  # in the runs recorded in bench/results.md.
  train_args=("$root/config/$config" "${extra[@]}" "${paths[@]}" -p "edge_paths=data/$imported/train"
              -p "workers=$workers" -p "eval_fraction=0")
  [[ -n ${ABG_BENCH_EPOCHS:-} ]] && train_args+=(-p "num_epochs=$ABG_BENCH_EPOCHS")
  average=${ABG_BENCH_AVERAGE:-}
  [[ -n $average ]] && train_args+=(-p "checkpoint_keep_versions=$average")
  load=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -f '%e %M' -o "$work/$name.time" "$abg" train "${train_args[@]}" >"$work/$name.train.log" 2>&1 ||
    { tail -20 "$work/$name.train.log" >&2; exit 1; }
  read -r seconds rss_kib <"$work/$name.time"
  averaged=
  if [[ -n $average ]]; then
    start=$(date +%s.%N)
    "$abg" average "$root/config/$config" "${extra[@]}" "${paths[@]}" --last "$average" 2>>"$work/$name.train.log" ||
      { tail -5 "$work/$name.train.log" >&2; exit 1; }
    took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    seconds=$(awk -v s="$seconds" -v t="$took" 'BEGIN { print s + t }')
    averaged=", then the mean of the last $average epochs (abg average, $took s, counted in)"
  fi
  epochs=${ABG_BENCH_EPOCHS:-$(sed -nE 's/^num_epochs *= *([0-9]+).*/\1/p' "$root/config/$config")}
  edges=$(wc -l <"$src/train.tsv")
  eval_args=("$root/config/$config" "${extra[@]}" "${paths[@]}" --edge-path "data/$imported/test" --json)
  [[ $eval_mode == filtered ]] && eval_args+=(--filtered)
  json=$("$abg" eval "${eval_args[@]}" 2>"$work/$name.eval.log")
  field() { sed -E "s/.*\"$1\": *([0-9.eE+-]+).*/\1/" <<<"$json"; }
  line=$(awk -v run="$name" -v w="$workers" -v ep="$epochs" -v e="$edges" -v s="$seconds" -v r="$rss_kib" \
             -v mrr="$(field mrr)" -v h1="$(field 'hits@1')" -v h3="$(field 'hits@3')" -v h10="$(field 'hits@10')" -v mode="$eval_mode" -v load="$load" -v avg="$averaged" \
    'BEGIN { printf "%s: %d epochs of %d edges, workers = %d%s: %.1f s, %.0f edges/s, peak RSS %.0f MiB; %s test MRR %.4f, Hits@1 %.4f, Hits@3 %.4f, Hits@10 %.4f (load average %s)", run, ep, e, w, avg, s, ep * e / s, r / 1024, mode, mrr, h1, h3, h10, load }')
  echo "$line"
  settings="ABG_BENCH_WORKERS=$workers${average:+, ABG_BENCH_AVERAGE=$average}"
  entry=$(printf -- '- %s %s (`bench/train_bench.sh %s`, %s)' "$(date -u +%F)" "$line" "$run" "$settings")
  append_result "$results" training training "$entry"
done
