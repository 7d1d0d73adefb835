#!/usr/bin/env bash
# What watching a run costs: soc-Slashdot0902 in 4 partitions, PBG's defaults,
# one process with 2 workers, 10 epochs, trained 3 times watched and 3 times
# not, alternating, in one invocation. Watched: a console in `watch buckets`
# (a redraw a second, in a tmux pane, as a person would run it) and the
# --metrics endpoint scraped every second. Prints each run's edges/s (the
# run's own figure: its edges over its training time) and the medians, and
# appends them, with the command, to bench/results.md.
#
#   bench/console_overhead.sh
#
# Environment: ABG_BENCH_EPOCHS (default 10), ABG_BENCH_DIR (default
# /tmp/abg-bench; the import is kept), ABG_DATA (default ../shared/data).
set -euo pipefail
. "$(dirname "$0")/results.sh"
name=console_overhead
. "$(dirname "$0")/slashdot4.sh"
command -v tmux >/dev/null || { echo "$name: needs tmux (tools/setup.sh installs it)" >&2; exit 1; }

session=abg-overhead-$$
scraper=""
cleanup() {
  tmux kill-session -t "$session" 2>/dev/null || true
  [[ -n $scraper ]] && kill "$scraper" 2>/dev/null || true
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# One run; prints its edges/s. $1: watched or plain.
run_once() {
  local mode=$1 log=$work/overhead-$1.log args=() port addr
  rm -rf model/overhead
  if [[ $mode == watched ]]; then
    port=$(free_port)
    args=(--metrics "127.0.0.1:$port")
  fi
  "$abg" train "$config" "${paths[@]}" "${train[@]}" -p checkpoint_path=model/overhead -p workers=2 "${args[@]}" \
    >/dev/null 2>"$log" &
  local pid=$!
  if [[ $mode == watched ]]; then
    for ((i = 0; i < 600; i++)); do
      addr=$(sed -nE 's/.*inspector listening on ([0-9.]+:[0-9]+).*/\1/p' "$log" | head -1)
      [[ -n $addr ]] && break
      sleep 0.1
    done
    [[ -n $addr ]] || { echo "$name: the run printed no inspector address" >&2; kill "$pid"; exit 1; }
    tmux new-session -d -s "$session" -x 160 -y 50 "$abg console $addr"
    sleep 2
    tmux send-keys -t "$session" "watch buckets" Enter
    python3 -c '
import sys, time, urllib.request
url, tally = sys.argv[1], sys.argv[2]
ok = 0
for _ in range(36000):
    try:
        if b"abg_trained_edges_total" in urllib.request.urlopen(url, timeout=5).read(): ok += 1
    except Exception: pass
    open(tally, "w").write(str(ok))
    time.sleep(1)
' "http://127.0.0.1:$port/metrics" "$work/overhead-scrapes" &
    scraper=$!
  fi
  if [[ $mode == watched ]]; then
    # Still watching when the run ends (checked before the end: the console
    # quits with an error once the run is gone).
    while kill -0 "$pid" 2>/dev/null; do
      tmux capture-pane -p -t "$session" >"$work/overhead-screen" 2>/dev/null || true
      sleep 1
    done
  fi
  wait "$pid" || { tail -20 "$log" >&2; exit 1; }
  if [[ $mode == watched ]]; then
    grep -q "watching buckets (every second)" "$work/overhead-screen" ||
      { echo "$name: the console was not watching buckets:" >&2; cat "$work/overhead-screen" >&2; exit 1; }
    (($(cat "$work/overhead-scrapes") >= 5)) || { echo "$name: the metrics endpoint was not scraped" >&2; exit 1; }
    echo "watched run: $(cat "$work/overhead-scrapes") scrapes" >&2
    tmux kill-session -t "$session" 2>/dev/null || true
    kill "$scraper" 2>/dev/null || true
    wait "$scraper" 2>/dev/null || true
    scraper=""
  fi
  # "trained 10 iteration(s) in 15.3 s: 9295410 edges (607.5k edges/s); ..."
  sed -nE 's/.*iteration\(s\).* in ([0-9.]+) s: ([0-9]+) edges .*/\2 \1/p' "$log" | tail -1 |
    awk '{ printf "%.0f", $1 / $2 }'
}

load=$(cut -d' ' -f1 /proc/loadavg)
plain=() watched=()
for round in 1 2 3; do
  p=$(run_once plain)
  w=$(run_once watched)
  echo "round $round: plain $p edges/s, watched $w edges/s"
  plain+=("$p") watched+=("$w")
done
median() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
mp=$(median "${plain[@]}") mw=$(median "${watched[@]}")
line=$(awk -v p="$mp" -v w="$mw" -v ps="${plain[*]}" -v ws="${watched[*]}" 'BEGIN {
  printf "median %d edges/s plain, %d edges/s watched (%.1f%% of plain; runs: plain %s, watched %s)", p, w, 100 * w / p, ps, ws }')
echo "$line"
entry=$(printf -- '- %s soc-Slashdot0902, 4 partitions, %d epochs, one process, 2 workers, with a console in `watch buckets` (1 Hz, tmux) and `--metrics` scraped every second against without, 3 runs each, alternating (load average %s, `bench/console_overhead.sh`): %s' \
  "$(date -u +%F)" "$epochs" "$load" "$line")
append_result "$results" "console" "console and metrics (\`bench/console_overhead.sh\`)" "$entry"
