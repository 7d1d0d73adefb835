#!/usr/bin/env bash
# soc-Slashdot0902, PBG's defaults, 4 partitions, 10 epochs, trained by 2
# nodes (PBG's layout, 1 worker each) in two network namespaces joined by a
# veth pair shaped to 1 Gbit/s with tc's token bucket filter: two "machines"
# with their own addresses on this host. The namespaces are made here and
# removed on exit; needs root. Prints the run's time, the test split's
# sampled MRR and the bytes each node's veth end sent and received (per
# epoch: the whole run's over the epochs), beside what the nodes counted and
# what the inspector's traffic view reports per node pair (read with the run
# paused by an admin console), and appends them, with the command, to
# bench/results.md.
#
#   sudo bench/netns_bench.sh
#
# Environment: ABG_BENCH_EPOCHS (default 10), ABG_BENCH_HOGWILD_DELAY (default:
# PBG's 2 s), ABG_BENCH_RATE (default 1gbit), ABG_BENCH_DIR (default
# /tmp/abg-bench; the import is kept and shared with cluster_bench.sh),
# ABG_DATA (default ../shared/data).
set -euo pipefail
. "$(dirname "$0")/results.sh"

rate=${ABG_BENCH_RATE:-1gbit}
[[ $(id -u) -eq 0 ]] || { echo "netns_bench: needs root (ip netns, tc)" >&2; exit 1; }
name=netns_bench
. "$(dirname "$0")/slashdot4.sh"

# Two namespaces and a veth pair with addresses only on it (a /30 of 10.231.0.0/16).
ns=(abg-bench-$$-a abg-bench-$$-b)
dev=(abgb$(($$ % 100000))a abgb$(($$ % 100000))b)
net=$(((($$ % 16000)) * 4))
addr=("10.231.$((net / 256)).$((net % 256 + 1))" "10.231.$((net / 256)).$((net % 256 + 2))")
cleanup() { for n in "${ns[@]}"; do ip netns del "$n" 2>/dev/null || true; done; }
trap cleanup EXIT
ip netns add "${ns[0]}"
ip netns add "${ns[1]}"
ip link add "${dev[0]}" type veth peer name "${dev[1]}"
for k in 0 1; do
  ip link set "${dev[$k]}" netns "${ns[$k]}"
  ip -n "${ns[$k]}" addr add "${addr[$k]}/30" dev "${dev[$k]}"
  ip -n "${ns[$k]}" link set "${dev[$k]}" up
  ip -n "${ns[$k]}" link set lo up
  ip netns exec "${ns[$k]}" tc qdisc add dev "${dev[$k]}" root tbf rate "$rate" burst 1mb latency 50ms
done

cluster=$work/netns-cluster.toml
# Beyond loopback the nodes need a cluster token (docs/security.md).
rm -f "$work/netns-cluster.token"
"$abg" cluster token "$work/netns-cluster.token" >/dev/null
rm -f "$work/netns-admin.token"
"$abg" cluster token "$work/netns-admin.token" >/dev/null
printf '[cluster]\nheartbeat_interval = 1.0\nheartbeat_timeout = 10.0\ntoken_file = "netns-cluster.token"\nadmin_token_file = "netns-admin.token"\n' >"$cluster"
for k in 0 1; do
  roles='"trainer", "partition_server", "parameter_server"'
  ((k == 0)) && roles='"coordinator", "lock_server", '$roles
  printf '\n[[nodes]]\nname = "n%d"\nhost = "%s"\nport = %d\nroles = [%s]\n' "$k" "${addr[$k]}" $((29800 + k)) "$roles" >>"$cluster"
done

counter() { ip netns exec "${ns[$1]}" cat "/sys/class/net/${dev[$1]}/statistics/$2_bytes"; }
load=$(cut -d' ' -f1 /proc/loadavg)
rm -rf model/netns
start=$(date +%s.%N)
pids=()
for k in 0 1; do
  ip netns exec "${ns[$k]}" "$abg" node "$cluster" "$config" --name "n$k" "${paths[@]}" "${train[@]}" \
    -p checkpoint_path=model/netns -p workers=1 >"$work/netns-n$k.log" 2>&1 &
  pids+=($!)
done
# The inspector's per-pair bytes against the veth counters: once the run is
# past half its epochs, an admin console pauses it; once nothing is trained
# or held, the veth counters are read, the traffic view asked, the counters
# read again (the two readings bracket the view), and the run resumed.
console() { ip netns exec "${ns[0]}" "$abg" console "$1" --token-file "$work/netns-cluster.token" "${@:2}"; }
inspected=""
inspector=""
for ((i = 0; i < 600; i++)); do
  [[ -z $inspector ]] || break
  inspector=$(sed -nE 's/.*inspector listening on ([0-9.]+:[0-9]+).*/\1/p' "$work/netns-n0.log" | head -1)
  [[ -n $inspector ]] || sleep 0.1
done
if [[ -n $inspector ]]; then
  for ((i = 0; i < 1200; i++)); do
    epoch=$(console "$inspector" --exec nodes --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["epoch"])' 2>/dev/null || echo 0)
    ((epoch * 2 >= epochs)) && break
    sleep 0.5
  done
  if console "$inspector" --exec pause --admin --admin-token-file "$work/netns-admin.token" >/dev/null 2>&1; then
    # Settled: an iteration under way (no commit in flight) and no bucket trained.
    for ((i = 0; i < 100; i++)); do
      settled=$(console "$inspector" --exec buckets --json 2>/dev/null |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print(int(d["phase"] == "training" and d["training"] == 0))' \
          2>/dev/null || echo 0)
      ((settled)) && break
      sleep 0.2
    done
    sleep 1
    before=("$(counter 0 tx)" "$(counter 1 tx)")
    view=$(console "$inspector" --exec traffic --json 2>/dev/null || true)
    after=("$(counter 0 tx)" "$(counter 1 tx)")
    console "$inspector" --exec resume --admin --admin-token-file "$work/netns-admin.token" >/dev/null 2>&1 || true
    inspected=$(python3 -c '
import json, sys
doc = json.loads(sys.argv[1])
b = [int(sys.argv[2]), int(sys.argv[3])]; a = [int(sys.argv[4]), int(sys.argv[5])]
out = []
for k, (src, dst) in enumerate((("n0", "n1"), ("n1", "n0"))):
    pair = [p["bytes"] for p in doc["pairs"] if p["from"] == src and p["to"] == dst]
    if not pair: sys.exit(1)
    out.append("%s to %s %.1f MB, %.1f%% of the %.1f MB its veth end sent (%.1f MB after the view)" %
               (src, dst, pair[0] / 1e6, 100.0 * pair[0] / b[k], b[k] / 1e6, a[k] / 1e6))
print("; ".join(out))
' "$view" "${before[@]}" "${after[@]}" 2>/dev/null || true)
  fi
fi
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
end=$(date +%s.%N)
((status == 0)) || { tail -20 "$work"/netns-n*.log >&2; exit 1; }
t=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
rate_edges=$(awk -v e="$edges" -v ep="$epochs" -v s="$t" 'BEGIN { printf "%.0f", e * ep / s }')
mrr=$(mrr model/netns)
# What node K counted: sent MB (total, swaps, checkpoints, parameters, control) and the swaps its trainer's schedule implies.
counted() {
  local c
  c=$(sed -nE 's/.*traffic with the other nodes: sent ([0-9.]+) MB \(swaps ([0-9.]+), checkpoints ([0-9.]+), parameters ([0-9.]+), control ([0-9.]+)\).*implies ([0-9.]+) MB of swaps.*/\1 \2 \3 \4 \5 \6/p' \
    "$work/netns-n$1.log")
  [[ -n $c ]] || { echo "netns_bench: node n$1 printed no traffic line" >&2; exit 1; }
  echo "$c"
}
line=$(awk -v c0="$(counted 0)" -v c1="$(counted 1)" -v tx0="$(counter 0 tx)" -v tx1="$(counter 1 tx)" -v ep="$epochs" \
  -v rate="$rate" -v t="$t" -v r="$rate_edges" -v mrr="$mrr" 'BEGIN {
  split(c0, a, " "); split(c1, b, " ")
  printf "2 nodes in 2 network namespaces over a %s veth (tc tbf), 1 worker each: %s s, %s edges/s, sampled test MRR %.4f; per epoch, as the nodes counted it:", rate, t, r, mrr
  for (k = 0; k < 2; ++k) {
    if (k == 0) { for (i in a) x[i] = a[i]; tx = tx0 } else { for (i in b) x[i] = b[i]; tx = tx1 }
    printf " node n%d sent %.1f MB (swaps %.1f, checkpoints %.1f, parameters %.1f, control %.1f), %.1f%% of the %.1f MB its veth end sent;",
      k, x[1] / ep, x[2] / ep, x[3] / ep, x[4] / ep, x[5] / ep, 100 * x[1] * 1e6 / tx, tx / 1e6 / ep
  }
  printf " swaps of both nodes %.1f MB, %.1f%% of the %.1f MB the trainers fetched and wrote back (rows x (dimension + 1) floats)",
    (a[2] + b[2]) / ep, 100 * (a[2] + b[2]) / (a[6] + b[6]), (a[6] + b[6]) / ep
}')
[[ -n $inspected ]] && line="$line; the inspector's traffic view, the run paused by an admin console past half its epochs: $inspected"
echo "$line"

entry=$(printf -- '- %s soc-Slashdot0902, 4 partitions, %d epochs, hogwild_delay %s (load average %s, `sudo bench/netns_bench.sh`): %s' \
  "$(date -u +%F)" "$epochs" "${ABG_BENCH_HOGWILD_DELAY:-2 (PBG default)}" "$load" "$line")
append_result "$results" cluster "cluster (\`bench/cluster_bench.sh\`, \`bench/netns_bench.sh\`, \`bench/actors/partition_transfer.cpp\`)" "$entry"
