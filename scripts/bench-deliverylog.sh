#!/usr/bin/env bash
# What recording deliveries in the delivery log (issue 38) costs ingest:
# triggerd with --delivery-log (the default) against the same build with
# --delivery-log=false, alternating within each round, posting the same
# payload to the shared code-hosting endpoint, whose deliveries the
# default tenant's log records.
#
#   scripts/bench-deliverylog.sh [duration] [concurrency]    # 10s 64
#   ROUNDS=5 HTTP_PORT=18600 NATS_PORT=4460 scripts/bench-deliverylog.sh
#   REDIS_URL=redis://127.0.0.1:6379/0 scripts/bench-deliverylog.sh
#
# With REDIS_URL the store is that Redis (each run under a key prefix of
# its own, deleted after it) instead of bbolt in a fresh data dir.
#
# It prints a Markdown row per round (req/s off and on, their ratio, p99,
# CPU per request, records dropped) and the median ratios. Odd rounds run
# off first, even rounds on first, so that a drift of the host's speed
# within a round does not favour one side.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:-10s}
concurrency=${2:-64}
rounds=${ROUNDS:-3}
warmup=${WARMUP:-2s}
http_port=${HTTP_PORT:-18098}
nats_port=${NATS_PORT:-14333}
payload=${PAYLOAD:-../shared/webhook-corpus/github/issues.opened.json}
[ -f "$payload" ] || { echo "payload $payload not found (set PAYLOAD)" >&2; exit 1; }

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/triggerd" ./cmd/triggerd
go build -o "$work/triggerctl" ./cmd/triggerctl
export TRIGGERD_CODEHOST_WEBHOOK_SECRET=bench-secret TRIGGERD_DEPLOY_WEBHOOK_SECRET=bench-secret
export TRIGGERD_NATS_PASSWORD=bench-nats-password

wait_http() { for _ in $(seq 100); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done; echo "no answer from $1" >&2; return 1; }
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$1" "$2"; }

# run LOG OUT benches triggerd started with --delivery-log=LOG into OUT,
# and prints how many records its log wrote and dropped.
redis_url=${REDIS_URL:-}
runs=0
run() {
  rm -rf "$work/data"
  local store=() prefix=""
  if [ -n "$redis_url" ]; then
    runs=$((runs + 1))
    prefix="bench-deliverylog-$$-$runs:"
    store=(--redis-url "$redis_url" --redis-prefix "$prefix" --redis-allow-volatile)
  fi
  "$work/triggerd" --http-addr "127.0.0.1:$http_port" --nats-listen "127.0.0.1:$nats_port" --data-dir "$work/data" \
    --delivery-log="$1" --log-level warn "${store[@]}" 2>"$work/triggerd.log" &
  local pid=$!
  wait_http "http://127.0.0.1:$http_port/healthz"
  "$work/triggerctl" bench --url "http://127.0.0.1:$http_port" --nats-url "nats://127.0.0.1:$nats_port" --file "$payload" --compact \
    --concurrency "$concurrency" --duration "$duration" --warmup "$warmup" --server-pid "$pid" --json > "$2"
  # Give the writer its flush interval, then read its counters.
  sleep 1
  curl -s "http://127.0.0.1:$http_port/metrics" | awk '/^triggerd_delivery_log_dropped_total/ {d=$2} END {printf "%d", d}' > "$2.dropped"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  if [ -n "$prefix" ]; then
    redis-cli -u "$redis_url" --scan --pattern "$prefix*" | xargs -r -n 500 redis-cli -u "$redis_url" del > /dev/null
  fi
}

store_name=bbolt
[ -z "$redis_url" ] || store_name="Redis ($redis_url)"
echo "store: $store_name; load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| round | off req/s | on req/s | on ÷ off | off p99 ms | on p99 ms | on CPU µs/req ÷ off | records dropped (buffer full) |"
echo "|---|---|---|---|---|---|---|---|"
ratios=()
cpus=()
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then
    run false "$work/off.json"
    run true "$work/on.json"
  else
    run true "$work/on.json"
    run false "$work/off.json"
  fi
  off=$(field "$work/off.json" "r['throughput_rps']")
  on=$(field "$work/on.json" "r['throughput_rps']")
  ratio=$(python3 -c "print($on/$off)")
  ratios+=("$ratio")
  cpu=$(python3 -c "print($(field "$work/on.json" "r['server_cpu_us_per_request']")/$(field "$work/off.json" "r['server_cpu_us_per_request']"))")
  cpus+=("$cpu")
  printf '| %s | %.0f | %.0f | %.3f | %.1f | %.1f | %.2f | %s |\n' "$r" "$off" "$on" "$ratio" \
    "$(field "$work/off.json" "r['latency_ms']['p99']")" "$(field "$work/on.json" "r['latency_ms']['p99']")" "$cpu" \
    "$(cat "$work/on.json.dropped")"
done
python3 -c "import statistics,sys; print('median throughput on ÷ off: %.3f over %d rounds' % (statistics.median(map(float, sys.argv[1:])), len(sys.argv)-1))" "${ratios[@]}"
python3 -c "import statistics,sys; print('median CPU per request on ÷ off: %.3f' % statistics.median(map(float, sys.argv[1:])))" "${cpus[@]}"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
