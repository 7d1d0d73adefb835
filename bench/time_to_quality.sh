#!/usr/bin/env bash
# Time to quality of 1-vs-all training: the tuned config (batch and uniform
# negatives, config/RUN-tuned.toml) is trained and evaluated by
# bench/train_bench.sh, and its filtered test MRR becomes the target; then the
# 1-vs-all config (config/RUN-sota.toml) trains up to EPOCHS epochs keeping
# every checkpoint version, and each version is evaluated on the test split
# until one reaches the target. Prints and appends to bench/results.md the
# tuned run's time and the 1-vs-all run's time to the same MRR.
#
#   bench/time_to_quality.sh RUN [EPOCHS]     RUN: wn18rr fb15k237; EPOCHS default 15
#
# The 1-vs-all time is the first k epochs' times from its training log plus
# all of the run's time outside epochs (start-up, checkpoints of later
# epochs): an upper bound. Environment as bench/train_bench.sh
# (ABG_BENCH_WORKERS, ABG_BENCH_DIR, ABG_DATA). Measure on a quiet machine.
set -euo pipefail
. "$(dirname "$0")/results.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
abg=$root/build/abg
work=${ABG_BENCH_DIR:-/tmp/abg-bench}
workers=${ABG_BENCH_WORKERS:-2}
results=$root/bench/results.md
run=${1:-}
epochs=${2:-15}
case $run in
  wn18rr | fb15k237) ;;
  *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
[[ $epochs =~ ^[1-9][0-9]*$ ]] || { echo "time_to_quality: EPOCHS must be a positive integer, not '$epochs'" >&2; exit 2; }

# the tuned run, its import included (train_bench.sh keeps it in $work/data/$run)
tuned=$(ABG_BENCH_EPOCHS= "$root/bench/train_bench.sh" "$run-tuned" | tail -1)
echo "$tuned"
target=$(sed -nE 's/.* test MRR ([0-9.]+),.*/\1/p' <<<"$tuned")
tuned_s=$(sed -nE 's/.*workers = [0-9]+: ([0-9.]+) s,.*/\1/p' <<<"$tuned")
tuned_epochs=$(sed -nE 's/^[^:]*: ([0-9]+) epochs.*/\1/p' <<<"$tuned")
[[ -n $target && -n $tuned_s ]] || { echo "time_to_quality: no MRR or time in train_bench's line: $tuned" >&2; exit 1; }

cd "$work"
name=$run-ttq
config=$root/config/$run-sota.toml
paths=(-p "entity_path=data/$run" -p "edge_paths=data/$run/train,data/$run/valid,data/$run/test"
       -p "checkpoint_path=model/$name")
rm -rf "model/$name"
load=$(cut -d' ' -f1 /proc/loadavg)
/usr/bin/time -f '%e' -o "$name.time" "$abg" train "$config" "${paths[@]}" -p "edge_paths=data/$run/train" \
  -p "workers=$workers" -p "eval_fraction=0" -p "num_epochs=$epochs" -p "checkpoint_keep_versions=$epochs" \
  >"$name.train.log" 2>&1 || { tail -20 "$name.train.log" >&2; exit 1; }
wall=$(<"$name.time")
# each epoch's seconds, in order ("epoch K edge path 0 chunk 0: trained ... in S s ("; the
# progress lines end in carriage returns, and an epoch's line may be printed twice)
mapfile -t epoch_s < <(tr '\r' '\n' <"$name.train.log" |
  sed -nE 's/^epoch ([0-9]+) edge path .* in ([0-9.]+) s \(.*/\1 \2/p' | awk '!seen[$1]++ { print $2 }')
[[ ${#epoch_s[@]} -ge $epochs ]] || { echo "time_to_quality: $epochs epoch lines expected in $work/$name.train.log" >&2; exit 1; }
outside=$(printf '%s\n' "${epoch_s[@]:0:$epochs}" | awk -v wall="$wall" '{ s += $1 } END { printf "%.1f", wall - s }')

reached=0 mrr=0
for ((k = 1; k <= epochs; ++k)); do
  json=$("$abg" eval "$config" "${paths[@]}" --edge-path "data/$run/test" --filtered --json --version "$k" 2>>"$name.eval.log")
  mrr=$(sed -E 's/.*"mrr": *([0-9.eE+-]+).*/\1/' <<<"$json")
  echo "1-vs-all epoch $k: filtered test MRR $mrr (target $target)"
  if awk -v a="$mrr" -v b="$target" 'BEGIN { exit !(a >= b) }'; then reached=$k; break; fi
done

if ((reached > 0)); then
  seconds=$(printf '%s\n' "${epoch_s[@]:0:$reached}" | awk -v o="$outside" '{ s += $1 } END { printf "%.1f", s + o }')
  line=$(awk -v run="$run" -v te="$tuned_epochs" -v ts="$tuned_s" -v t="$target" -v k="$reached" -v s="$seconds" \
             -v mrr="$mrr" -v w="$workers" -v load="$load" \
    'BEGIN { printf "%s, workers = %d: the tuned config reaches filtered test MRR %.4f after %d epochs in %.1f s; config/%s-sota.toml (1-vs-all) reaches %.4f after %d epochs in %.1f s, %.1fx sooner (load average %s)", run, w, t, te, ts, run, mrr, k, s, ts / s, load }')
else
  line=$(awk -v run="$run" -v te="$tuned_epochs" -v ts="$tuned_s" -v t="$target" -v e="$epochs" -v mrr="$mrr" \
             -v w="$workers" -v load="$load" \
    'BEGIN { printf "%s, workers = %d: the tuned config reaches filtered test MRR %.4f after %d epochs in %.1f s; config/%s-sota.toml (1-vs-all) did not reach it in %d epochs (%.4f after the last) (load average %s)", run, w, t, te, ts, run, e, mrr, load }')
fi
echo "$line"
append_result "$results" "1-vs-all" '1-vs-all kernel (`bench/all_negs_bench.sh`, `bench/train_bench.sh *-sota`)' \
  "- $(date -u +%F) $line (\`bench/time_to_quality.sh $run $epochs\`)"
