#!/usr/bin/env bash
# soc-Slashdot0902, PBG's defaults, 4 partitions, 10 epochs, trained by one
# process with 2 workers and by clusters of separate processes on loopback
# (abg cluster up; PBG's layout: every node a trainer, a partition server and
# a parameter-server shard; 1 worker each), in one invocation. Each run is
# timed whole (start-up, seeding, checkpoints) and its test split ranked
# (sampled, as PBG's torchbiggraph_eval). Prints one line per run and the
# ratio of each cluster's edges/s to the one process's, and appends them, with
# the command, to bench/results.md.
#
#   bench/cluster_bench.sh [NODES...]      (default: 2 4; "2t": 2 nodes with TLS between them,
#                                          certificates from abg cluster certs; "2f": 2 nodes
#                                          while bench/strangers.py keeps 100 idle and 100
#                                          trickling connections open on every node's port)
#
# Environment: ABG_BENCH_EPOCHS (default 10), ABG_BENCH_HOGWILD_DELAY (default:
# PBG's 2 s), ABG_BENCH_DIR (default /tmp/abg-bench; the import is kept),
# ABG_DATA (default ../shared/data).
set -euo pipefail
. "$(dirname "$0")/results.sh"

here=$(cd "$(dirname "$0")" && pwd)
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(2 4)
name=cluster_bench
. "$(dirname "$0")/slashdot4.sh"

# A cluster file of N nodes in PBG's layout on free loopback ports.
cluster_file() {
  local n=$1 file=$2 port
  printf '[cluster]\nheartbeat_interval = 1.0\nheartbeat_timeout = 10.0\n' >"$file"
  for ((i = 0; i < n; i++)); do
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    roles='"trainer", "partition_server", "parameter_server"'
    ((i == 0)) && roles='"coordinator", "lock_server", '$roles
    printf '\n[[nodes]]\nname = "n%d"\nhost = "127.0.0.1"\nport = %d\nroles = [%s]\n' "$i" "$port" "$roles" >>"$file"
  done
}

lines=()
record() { echo "$1"; lines+=("$1"); }
load=$(cut -d' ' -f1 /proc/loadavg)

rm -rf model/cb1
/usr/bin/time -f '%e' -o "$work/cb1.time" "$abg" train "$config" "${paths[@]}" "${train[@]}" -p checkpoint_path=model/cb1 \
  -p workers=2 >"$work/cb1.log" 2>&1 || { tail -20 "$work/cb1.log" >&2; exit 1; }
one=$(cat "$work/cb1.time")
one_rate=$(awk -v e="$edges" -v ep="$epochs" -v s="$one" 'BEGIN { printf "%.0f", e * ep / s }')
record "$(printf 'one process, 2 workers: %.1f s, %s edges/s, sampled test MRR %.4f' "$one" "$one_rate" "$(mrr model/cb1)")"
for size in "${sizes[@]}"; do
  n=${size%%[tf]*}
  rm -rf "model/cb$size.n" "$work/certs$size"
  cluster_file "$n" "$work/cluster$size.toml"
  over=""
  flood=""
  if [[ $size == *f* ]]; then
    mapfile -t doors < <(sed -n 's/^port = \([0-9]*\)/127.0.0.1:\1/p' "$work/cluster$size.toml")
    python3 "$here/strangers.py" "${doors[@]}" 2>"$work/strangers$size.log" &
    flood=$!
    over=" with 200 strangers at each node's port"
  fi
  if [[ $size == *t* ]]; then
    "$abg" cluster certs "$work/cluster$size.toml" "$work/certs$size" >/dev/null
    printf '\n[tls]\ncertificate = "certs%s/{name}.pem"\nkey = "certs%s/{name}.key"\nca = "certs%s/ca.pem"\n' \
      "$size" "$size" "$size" >>"$work/cluster$size.toml"
    over="$over over TLS"
  fi
  /usr/bin/time -f '%e' -o "$work/cb$size.time" "$abg" cluster up "$work/cluster$size.toml" "$config" "${paths[@]}" \
    "${train[@]}" -p "checkpoint_path=model/cb$size.n" -p workers=1 >"$work/cb$size.log" 2>&1 ||
    { tail -20 "$work/cb$size.log" >&2; exit 1; }
  if [[ -n $flood ]]; then
    kill "$flood" && wait "$flood" || true
    over="$over ($(sed -n 's/^strangers: //p' "$work/strangers$size.log"))"
  fi
  t=$(cat "$work/cb$size.time")
  rate=$(awk -v e="$edges" -v ep="$epochs" -v s="$t" 'BEGIN { printf "%.0f", e * ep / s }')
  swap=$(sed -nE 's/.*swapping partitions ([0-9.]+) s.*/\1/p' "$work/cb$size.log" | awk '{ s += $1 } END { printf "%.1f", s }')
  record "$(printf '%d nodes (processes)%s, 1 worker each: %.1f s, %s edges/s (%.0f%% of one process), %s s swapping partitions (all trainers), sampled test MRR %.4f' \
    "$n" "$over" "$t" "$rate" "$(awk -v a="$rate" -v b="$one_rate" 'BEGIN { print 100 * a / b }')" "$swap" "$(mrr "model/cb$size.n")")"
done

entry=$(printf -- '- %s soc-Slashdot0902, 4 partitions, %d epochs, hogwild_delay %s (load average %s, `bench/cluster_bench.sh %s`):' \
  "$(date -u +%F)" "$epochs" "${ABG_BENCH_HOGWILD_DELAY:-2 (PBG default)}" "$load" "${sizes[*]}")
for l in "${lines[@]}"; do entry+=$'\n'"  - $l"; done
append_result "$results" cluster "cluster (\`bench/cluster_bench.sh\`, \`bench/netns_bench.sh\`, \`bench/actors/partition_transfer.cpp\`)" "$entry"
