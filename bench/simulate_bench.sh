#!/usr/bin/env bash
# The cluster simulator (abg simulate) against measured runs: soc-Slashdot0902,
# PBG's defaults, 4 partitions, hogwild_delay 0. The kernel's speed is measured
# here by one process with one worker (the nodes' worker count), and again by
# abg simulate's own short run of the kernel (--short-run); the real runs
# are bench/cluster_bench.sh's 2 and 4 nodes on loopback and, as root,
# bench/netns_bench.sh's 2 nodes over a 1 Gbit/s veth. Compared: the median
# epoch time of each run (training_stats.json: from an epoch's start to its
# last write-back, epochs after the first) against the simulated one. The
# nodes share this host's cores (abg simulate --host-cores: kernels running
# at once share them). Loopback is modelled as
# ABG_BENCH_LOOPBACK (default 2.6GB: the bulk channel's measured rate,
# bench/actors/partition_transfer.cpp) with 50 us latency. Prints predicted
# against measured (both predictions) and appends them, with the command, to
# bench/results.md; then exits 1 if any prediction is more than 25% off
# (issue 13's bound).
#
#   [sudo] bench/simulate_bench.sh
#
# Environment: ABG_BENCH_EPOCHS (default 10), ABG_BENCH_DIR, ABG_DATA (as
# cluster_bench.sh).
set -euo pipefail
. "$(dirname "$0")/results.sh"

name=simulate_bench
export ABG_BENCH_HOGWILD_DELAY=0
bench=$(cd "$(dirname "$0")" && pwd)
. "$bench/slashdot4.sh"
loopback=${ABG_BENCH_LOOPBACK:-2.6GB}
cores=$(nproc)

# One trainer's edges/s: one process, one worker, 3 epochs.
rm -rf model/sim1
"$abg" train "$config" "${paths[@]}" "${train[@]}" -p num_epochs=3 -p checkpoint_path=model/sim1 -p workers=1 \
  >"$work/sim1.log" 2>&1 || { tail -20 "$work/sim1.log" >&2; exit 1; }
rate=$(python3 - model/sim1/training_stats.json <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][1:]
print(f"{sum(r['edges'] for r in rows) / sum(r['seconds'] for r in rows):.0f}")
PY
)

ABG_BENCH_EPOCHS=$epochs "$bench/cluster_bench.sh" 2 4 >/dev/null
# label|nodes|link|checkpoint|cores of the host the nodes share
runs=("2 nodes on loopback|2|$loopback|model/cb2.n|$cores" "4 nodes on loopback|4|$loopback|model/cb4.n|$cores")
if [[ $(id -u) -eq 0 ]] && ABG_BENCH_EPOCHS=$epochs "$bench/netns_bench.sh" >/dev/null 2>&1; then
  runs+=("2 nodes over a 1 Gbit/s veth|2|1gbit|model/netns|$cores")
else
  echo "simulate_bench: the network-namespace run needs root and ip netns: skipped" >&2
fi

# the first row's simulated seconds and the kernel speed it used
row='import json, sys; r = json.load(sys.stdin)[0]; print("%.3f %.0f" % (r["training_seconds"], r["kernel_edges_per_second"]))'
lines=()
off=()
load=$(cut -d' ' -f1 /proc/loadavg)
for run in "${runs[@]}"; do
  IFS='|' read -r label nodes link model host_cores <<<"$run"
  [[ -f $model/training_stats.json ]] || { echo "simulate_bench: $model has no training_stats.json" >&2; exit 1; }
  measured=$(epoch_seconds "$model")
  simulate=("$abg" simulate "$config" "${paths[@]}" "${train[@]}" -p workers=1 --machines "$nodes" --bandwidth "$link"
            --latency 50us --host-cores "$host_cores" --json)
  read -r predicted _ < <("${simulate[@]}" --edges-per-second "$rate" | python3 -c "$row")
  read -r short short_rate < <("${simulate[@]}" --short-run | python3 -c "$row")
  line=$(awk -v l="$label" -v p="$predicted" -v s="$short" -v r="$short_rate" -v m="$measured" \
    'BEGIN { printf "%s: simulated %.2f s per epoch (%.2f s with a short run'"'"'s %.0f edges/s), measured %.2f s (%+.0f%%, %+.0f%%)", l, p, s, r, m, 100 * (p - m) / m, 100 * (s - m) / m }')
  echo "$line"
  lines+=("$line")
  within_bound "simulate_bench: $label" "$predicted" "$measured" || off+=("$label")
  within_bound "simulate_bench: $label, short run" "$short" "$measured" || off+=("$label, short run")
done

entry=$(printf -- '- %s simulator against measured runs, soc-Slashdot0902, 4 partitions, %d epochs, hogwild_delay 0, one worker measured at %s edges/s (load average %s, `bench/simulate_bench.sh`):' \
  "$(date -u +%F)" "$epochs" "$rate" "$load")
for l in "${lines[@]}"; do entry+=$'\n'"  - $l"; done
append_result "$results" "cluster simulator" 'cluster simulator (`bench/simulate_bench.sh`, `abg simulate`)' "$entry"
# Recorded either way; the exit status says whether every prediction was within 25%.
(( ${#off[@]} == 0 ))
