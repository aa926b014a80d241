#!/usr/bin/env bash
# The HTTP grab against the grabber's own /healthz under wrk, as the ledger
# throughput targets are stated (BENCHMARKS.md, "The HTTP grab with the
# trimmed ledger"): for each round, a fresh envelope of WRK_PACKETS packets,
# `wrk -t2 -c64` of grabs (a new user each, bench/wrk-grab.lua), then of
# /healthz, and the CPU each local process spent per request, read from
# /proc (grabber, flusher, redis-server, postgres), with the grab script's
# calls from Redis INFO commandstats.
#
#   bench/wrk.sh [rounds]
#
# Needs a running grabber (GRABBER_URL, default http://127.0.0.1:8080; its
# MAX_PACKETS at least WRK_PACKETS) with its flusher, wrk, redis-cli
# (REDIS_URL, default redis://127.0.0.1:6379/0) and python3. WRK_DURATION
# (8s) is each wrk run; WRK_PACKETS (1000000) must outlast it, or the grabs
# after the last packet (cheaper) are counted too. Grabs are answered 200
# until then; wrk's "Non-2xx" line says when not.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
URL=${GRABBER_URL:-http://127.0.0.1:8080}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
DURATION=${WRK_DURATION:-8s}
PACKETS=${WRK_PACKETS:-1000000}
if [[ -n ${GRABBER_API_TOKEN:-} ]]; then AUTH=(-H "Authorization: Bearer $GRABBER_API_TOKEN"); else AUTH=(); fi

cpu() { # CPU ticks of each process kind, in the order named
	local name pid t
	for name in grabber flusher redis-server postgres; do
		t=0
		for pid in $(pgrep -x "$name" || true); do
			t=$((t + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
		done
		printf '%s ' "$t"
	done
}
evalsha() { # calls and µs of EVALSHA so far
	redis-cli -u "$REDIS_URL" INFO commandstats | tr -d '\r' |
		awk -F'[=,:]' '$1 == "cmdstat_evalsha" { calls = $3; usec = $5 } END { print calls + 0, usec + 0 }'
}
requests() { awk '/requests in/ { print $1 }' "$1"; }
rate() { awk '/Requests\/sec/ { print $2 }' "$1"; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for round in $(seq "$ROUNDS"); do
	env=$(curl -sf ${AUTH[@]+"${AUTH[@]}"} -X POST "$URL/v1/envelopes" -H 'Content-Type: application/json' \
		-d "{\"sender_id\":\"wrk\",\"total_cents\":$((PACKETS * 10)),\"count\":$PACKETS,\"expires_in_seconds\":3600}" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["envelope_id"])')
	sleep 2
	c0=$(cpu) s0=$(evalsha)
	wrk -t2 -c64 -d"$DURATION" ${AUTH[@]+"${AUTH[@]}"} -s bench/wrk-grab.lua "$URL/v1/envelopes/$env/grab" >"$out/grab"
	c1=$(cpu) s1=$(evalsha)
	wrk -t2 -c64 -d"$DURATION" "$URL/healthz" >"$out/healthz"
	c2=$(cpu)
	grep -h 'Non-2xx' "$out/grab" || true
	python3 - "$round" "$(rate "$out/grab")" "$(rate "$out/healthz")" "$(requests "$out/grab")" \
		"$(requests "$out/healthz")" "$c0" "$c1" "$c2" "$s0" "$s1" "$(getconf CLK_TCK)" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import sys
rnd, grab, health, ng, nh = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
c0, c1, c2 = ([int(x) for x in a.split()] for a in sys.argv[6:9])
s0, s1 = ([int(x) for x in a.split()] for a in sys.argv[9:11])
tick, load = int(sys.argv[11]), sys.argv[12]
names = ["grabber", "flusher", "redis", "postgres"]
us = lambda a, b, n: " ".join(f"{nm} {(y - x) / tick / n * 1e6:.1f}" for nm, x, y in zip(names, a, b))
calls, usec = s1[0] - s0[0], s1[1] - s0[1]
print(f"round {rnd} (load {load}): grab {grab:.0f}/s, healthz {health:.0f}/s, ratio {grab / health:.3f}")
print(f"  µs of CPU a grab: {us(c0, c1, ng)}")
print(f"  µs of CPU a healthz: {us(c1, c2, nh)}")
if calls:
    print(f"  grab script: {ng / calls:.1f} grabs a call, {usec / ng:.1f} µs a grab")
PY
done
