#!/usr/bin/env bash
# Transactional messages (`scripts/bench-api --messages`): the embedded stack (`pushfan
# kafka-dev`, a SQLite store, `pushfan apns-sim` answering at APNs' latency, two workers and
# `pushfan api`), an app of DEVICES devices (default 1,000,000), two per user, at RATE
# sends per second (default 10,000):
#
#   idle_p50_ms, idle_p99_ms          MESSAGES (200) messages to one random user each, one every
#                                     50 ms, nothing else sending: from the API's answer to the
#                                     simulator receiving the message's last device
#   campaign_p50_ms, campaign_p99_ms  the same, MESSAGES spread over a campaign to every device
#                                     of the app, sending at the app's rate (goal: p99 < 500 ms)
#   campaign_total_s, campaign_ideal_s  that campaign from submit to its completed event, and
#                                     DEVICES / RATE: what the rate allows
#   messages_per_s, messages_p99_ms   wrk posting messages to random users over CONNECTIONS (64)
#                                     connections for DURATION (10) s, the workers sending them
#                                     on the same two cores (goal: at least 5,000 accepted per second)
#   messages_per_s_api_alone, …_p99_ms_api_alone  the same with the workers stopped: what the
#                                     API accepts when it has the machine (Kafka and the store)
#   lost                              messages answered 202 whose devices the simulator never saw
#
# WORKER_ARGS: arguments for both workers, by default "--property fetch.wait.max.ms=10": the
# dev cluster (librdkafka's mock) holds an empty fetch for its whole wait instead of answering
# when a record arrives, as a real broker does, which added 40-80 ms to every message here
# (the workers' default wait is 100 ms); WORKER_ARGS="" measures with it.
# API_ARGS: more arguments for `pushfan api` (none by default).
# KEEP=1 keeps the run's directory (logs, the simulator's log) and prints where it is.
# Last line: {"bench":"api-messages",…}
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/env.sh
. scripts/bench/workers.sh
scripts/setup >&2

DEVICES=${DEVICES:-1000000}
RATE=${RATE:-10000}
MESSAGES=${MESSAGES:-200}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-64}
users=$((DEVICES / 2))
worker_args=${WORKER_ARGS-"--property fetch.wait.max.ms=10"}
if [ -n "${PUSHFAN:-}" ]; then
  pushfan=$PUSHFAN
else
  swift build -c release --jobs 2 --product pushfan >&2
  pushfan=$PWD/.build/release/pushfan
fi
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
now_ms() { date +%s%3N; }

database="sqlite:$work/store.db"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/key.p8" 2>/dev/null
"$pushfan" apps add --database "$database" --app shop --topic com.example.shop --team-id TEAM000001 --key-id KEY0000001 \
  --key-file "$work/key.p8" --rate "$RATE" --log-level warning > "$work/secrets.txt"
master=$(sed -n 's/^master secret: //p' "$work/secrets.txt")
echo "importing $DEVICES devices, two per user" >&2
python3 scripts/bench/devices.py "$DEVICES" 0 0 2 > "$work/devices.ndjson"
"$pushfan" devices import --database "$database" --app shop "$work/devices.ndjson" --log-level warning >&2
rm "$work/devices.ndjson"

"$pushfan" kafka-dev --partitions 12 --bootstrap-file "$work/bootstrap" --log-level warning > "$work/kafka.out" 2> "$work/kafka.err" &
pids+=($!)
(cd "$work" && exec "$pushfan" apns-sim --port 0 --accept-any-key --ca-out ca.pem --log sim.ndjson --log-level warning > sim.out 2> sim.err) &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/bootstrap" ] && grep -q "listening on" "$work/sim.out" 2>/dev/null && break; sleep 0.1; done
brokers=$(cat "$work/bootstrap")
sim=$(head -1 "$work/sim.out" | sed 's/.* on //')
curl -sf --http2 --cacert "$work/ca.pem" -d '{"latency": "apns"}' "$sim/_sim/control" > /dev/null
kafka=(--brokers "$brokers" --property session.timeout.ms=6000 --property heartbeat.interval.ms=500)
worker_pids=""
for n in 1 2; do
  # shellcheck disable=SC2086 # worker_args: word-split on purpose
  "$pushfan" worker --id "w$n" --database "$database" --url "$sim" --ca-file "$work/ca.pem" "${kafka[@]}" $worker_args --log-level info \
    > "$work/w$n.out" 2> "$work/w$n.err" &
  pids+=($!)
  worker_pids="$worker_pids $!"
done
# shellcheck disable=SC2086 # API_ARGS: word-split on purpose
"$pushfan" api --port 0 --database "$database" "${kafka[@]}" ${API_ARGS:-} --no-dashboard --log-level warning > "$work/api.out" 2> "$work/api.err" &
pids+=($!)
wait_for_groups "$work/w1.err" "$work/w2.err"
for _ in $(seq 100); do grep -q "listening on" "$work/api.out" 2>/dev/null && break; sleep 0.1; done
api=$(sed -n 's/^api listening on //p' "$work/api.out")
[ -n "$api" ] || { echo "pushfan api did not start: $(cat "$work/api.err")" >&2; exit 1; }

# p50 and p99 of (the simulator's receive time of a message's last device - the API's
# answer), over the messages listed in $1; waits up to 30 s for the stragglers.
latencies() {
  python3 - "$1" "$work/sim.ndjson" <<'PY'
import json, sys, time
sent = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
answered = {m["message"]: m for m in sent if "message" in m}
refused = len(sent) - len(answered)
deadline = time.time() + 30
while True:
    last, seen = {}, {}
    with open(sys.argv[2]) as log:
        for line in log:
            if '"collapse_id":"msg-' not in line:
                continue
            record = json.loads(line)
            id = record["collapse_id"]
            if id in answered:
                last[id] = max(last.get(id, 0), record["time_ms"])
                seen[id] = seen.get(id, 0) + 1
    done = [id for id in answered if seen.get(id, 0) >= answered[id]["devices"]]
    if len(done) == len(answered) or time.time() > deadline:
        break
    time.sleep(0.5)
waits = sorted(last[id] - answered[id]["answered_ms"] for id in done)
pick = lambda q: round(waits[min(len(waits) - 1, int(q * len(waits)))], 1) if waits else None
print(json.dumps({"p50": pick(0.5), "p99": pick(0.99), "lost": len(answered) - len(done), "refused": refused}))
PY
}

echo "messages with nothing else sending" >&2
python3 scripts/bench/messages.py "$api" shop "$master" "$users" "$MESSAGES" 0.05 > "$work/idle.ndjson"
idle=$(latencies "$work/idle.ndjson")
echo "idle: $idle" >&2

echo "a campaign to $DEVICES devices at $RATE/s, $MESSAGES messages spread over it" >&2
printf '{"v":1,"id":"bulk","app":"shop","audience":{"segment":"locale = en_US or locale != en_US"},"notification":{"push_type":"alert","content":{"default":{"title":"Pushfan benchmark","body":"A notification of the size campaigns send: a title and a body line."}}}}' \
  > "$work/bulk.json"
start=$(now_ms)
"$pushfan" submit "$work/bulk.json" --wait --timeout 1800 "${kafka[@]}" --log-level warning > "$work/bulk.summary" &
submit=$!
# Spread over the middle of the campaign: from about 5 % of its devices to 85 %.
bulk_sent() { grep -c '"collapse_id":"bulk"' "$work/sim.ndjson" 2>/dev/null || true; }
until [ "$(bulk_sent)" -ge $((DEVICES / 20)) ]; do sleep 0.2; done
interval=$(python3 -c "print($DEVICES / $RATE * 0.8 / $MESSAGES)")
python3 scripts/bench/messages.py "$api" shop "$master" "$users" "$MESSAGES" "$interval" > "$work/during.ndjson"
during=$(latencies "$work/during.ndjson")
echo "during the campaign: $during" >&2
wait "$submit"
total_ms=$(( $(now_ms) - start ))
cat "$work/bulk.summary" >&2

echo "wrk: messages over $CONNECTIONS connections for ${DURATION}s" >&2
cat > "$work/messages.lua" <<LUA
math.randomseed(11)
function request()
  local body = '{"recipients":{"users":["u' .. math.random(0, $users - 1) .. '"]},"notification":{"push_type":"alert","content":{"default":{"title":"Order shipped","body":"On its way"}}}}'
  return wrk.format("POST", "/v1/apps/shop/messages",
    {["Content-Type"] = "application/json", ["Authorization"] = "Basic $(printf 'shop:%s' "$master" | base64 -w0)"}, body)
end
LUA
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$work/messages.lua" "$api" > "$work/wrk.txt"
cat "$work/wrk.txt" >&2
echo "wrk: the same with the workers stopped (the API alone)" >&2
for pid in $worker_pids; do kill "$pid"; done
wait $worker_pids 2>/dev/null || true
wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$work/messages.lua" "$api" > "$work/wrk-alone.txt"
cat "$work/wrk-alone.txt" >&2

python3 - "$work" "$idle" "$during" "$total_ms" "$DEVICES" "$RATE" <<'PY'
import json, re, sys
work, idle, during, total_ms, devices, rate = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
def wrk(name):
    text = open(f"{work}/{name}.txt").read()
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", text)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return (round(float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))),
            round(float(p99.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[p99.group(2)], 1), int(errors.group(1)) if errors else 0)
beside, alone = wrk("wrk"), wrk("wrk-alone")
print(json.dumps({"bench": "api-messages", "devices": devices, "rate": rate,
                  "idle_p50_ms": idle["p50"], "idle_p99_ms": idle["p99"],
                  "campaign_p50_ms": during["p50"], "campaign_p99_ms": during["p99"],
                  "campaign_total_s": round(total_ms / 1000, 1), "campaign_ideal_s": round(devices / rate, 1),
                  "messages_per_s": beside[0], "messages_p99_ms": beside[1], "messages_per_s_api_alone": alone[0], "messages_p99_ms_api_alone": alone[1],
                  "non_2xx": beside[2] + alone[2],
                  "lost": idle["lost"] + during["lost"], "refused": idle["refused"] + during["refused"]}, separators=(",", ":")))
PY
