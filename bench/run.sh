#!/usr/bin/env bash
# Same-run references for the grab path (`make bench`; see BENCHMARKS.md,
# "Load tool and same-run references"). In one go, on this machine:
#
#   (a)  bench/original.lua, the source design's grab script, under
#        redis-benchmark: once without pipelining, once with -P 16;
#   (a') the shipped internal/redisstore/grab.lua the same way, one grab a
#        call, without pipelining (skipped if its KEYS/ARGV layout is not one
#        known here);
#   (b)  loadgen against `loadgen noop-server` (the grabber's HTTP stack, no
#        work), -noop;
#   (c)  loadgen against grabber + flusher + Redis + PostgreSQL, checked, with
#        the flush lag read from PostgreSQL;
#   (d)  the grab service in process (Go benchmark, 64 callers, real Redis);
#   (e)  the flusher draining 100,000 queued claims (Go benchmark);
#   (f)  creating a 100,000-packet envelope (Go benchmark);
#   (g)  Redis memory per pooled packet, unflushed grab and kept claim;
#
# then prints them side by side with ratios and writes
# bench/results/<UTC date>.txt and .json, and the page comparing them,
# .html (loadgen bench-page: inline SVG, nothing fetched), with a screenshot
# of it, .png, when headless Chromium is installed.
#
# Servers: REDIS_URL (default redis://127.0.0.1:6379/0) and DATABASE_URL
# (default postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable), used
# only to reach the server: the run drops and re-creates its own database
# redpacket_bench there (fresh tables each run) and uses its own Redis key
# prefix (BENCH_PREFIX, default rpbench), whose keys it deletes before and
# after. It never flushes a database.
#
# Knobs (environment): BENCH_USERS (50, the concurrency of every part),
# BENCH_DURATION (10s, each loadgen run), BENCH_RB_REQUESTS (200000, each
# redis-benchmark run), BENCH_ENVELOPES x BENCH_PACKETS (4 x 50000 packets
# for (c)), BENCH_GRABS (unset: runs end at BENCH_DURATION unless sold out),
# BENCH_COMMIT (names the code in the results when this is not a git checkout).
set -euo pipefail
cd "$(dirname "$0")/.."

REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379/0}
DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
PREFIX=${BENCH_PREFIX:-rpbench}
USERS=${BENCH_USERS:-50}
DURATION=${BENCH_DURATION:-10s}
RB_REQUESTS=${BENCH_RB_REQUESTS:-200000}
ENVELOPES=${BENCH_ENVELOPES:-4}
PACKETS=${BENCH_PACKETS:-50000}
GRABS=${BENCH_GRABS:-}
BENCH_DB=redpacket_bench
# The same server, database redpacket_bench (the path of the URL replaced).
BENCH_DB_URL=$(sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\1/$BENCH_DB#" <<<"$DATABASE_URL")

for tool in go psql redis-cli redis-benchmark jq curl timeout; do
	command -v "$tool" >/dev/null || { echo "bench: $tool is needed" >&2; exit 1; }
done

WORK=$(mktemp -d)
PIDS=()
cleanup() {
	local pid
	for pid in "${PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	delete_keys
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rcli() { redis-cli -u "$REDIS_URL" "$@"; }

# delete_keys removes this run's Redis keys: the grabber's, all inside the
# hash tags {<prefix>:...}, and the reference scripts' <prefix>:rb:*.
delete_keys() {
	local pattern
	for pattern in "{$PREFIX:*" "$PREFIX:rb:*" "{$PREFIX:rb}:*"; do
		rcli --scan --pattern "$pattern" | xargs -r -n 500 redis-cli -u "$REDIS_URL" DEL >/dev/null
	done
}

# free_port prints a TCP port nothing on 127.0.0.1 listens on.
free_port() {
	local try port
	for try in $(seq 50); do
		port=$((20000 + RANDOM % 30000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return
		fi
	done
	echo "bench: no free port found" >&2
	return 1
}

# wait_ready waits up to 15 s for url to answer 200.
wait_ready() {
	local try
	for try in $(seq 150); do
		curl -fsS -o /dev/null "$1" 2>/dev/null && return
		sleep 0.1
	done
	echo "bench: $1 not ready after 15s" >&2
	return 1
}

# start runs a daemon in the background, its output in $WORK/<name>.log.
start() {
	local name=$1
	shift
	"$@" >"$WORK/$name.log" 2>&1 &
	PIDS+=($!)
}

# fill_pool pushes n packets onto a list, 10,000 per script call so that no
# call holds Redis for long. format is "json" (original.lua) or "plain"
# (grab.lua's "<packet>:<amount>").
fill_pool() {
	local key=$1 n=$2 format=$3 from to
	local script="for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do
		local money = i % 200 + 1
		if ARGV[3] == 'json' then
			redis.call('RPUSH', KEYS[1], cjson.encode({id = i, money = money}))
		else
			redis.call('RPUSH', KEYS[1], i .. ':' .. money)
		end
	end"
	for ((from = 1; from <= n; from += 10000)); do
		to=$((from + 9999 < n ? from + 9999 : n))
		rcli EVAL "$script" 1 "$key" "$from" "$to" "$format" >/dev/null
	done
}

# redis_bench runs redis-benchmark on a script and prints "rps p50_ms p99_ms".
# -r makes __rand_int__ a new 12-digit user id on (nearly) every call.
redis_bench() {
	local pipeline=$1
	shift
	timeout 300 redis-benchmark -u "$REDIS_URL" -n "$RB_REQUESTS" -c "$USERS" -P "$pipeline" -r 1000000000 --csv "$@" |
		awk -F'","' 'NR == 2 { gsub(/"/, "", $NF); print $2, $5, $7 }'
}

bench_original() {
	local pipeline=$1 sha
	local pool=$PREFIX:rb:orig:pool consumed=$PREFIX:rb:orig:consumed users=$PREFIX:rb:orig:users
	rcli DEL "$pool" "$consumed" "$users" >/dev/null
	fill_pool "$pool" "$RB_REQUESTS" json
	sha=$(rcli SCRIPT LOAD "$(cat bench/original.lua)")
	redis_bench "$pipeline" EVALSHA "$sha" 3 "$pool" "$consumed" "$users" u:__rand_int__
	rcli DEL "$pool" "$consumed" "$users" >/dev/null
}

# bench_shipped runs grab.lua, one grab a call, with its KEYS/ARGV as
# documented in the file. Three layouts are known: the current one (consumed
# list, the shard's order-number hash, then meta, pool, the user's claims
# bucket and recipients of each grab; ARGV the day, width, shards, offset and
# largest counter, then user, now (ms), envelope id, password digest, claim
# buckets and reservation flag, 0 (may take a packet), of each grab), whose
# order hash is given a ceiling no run reaches and this Redis's identity, and
# whose meta names one claim bucket so that every random user's claim goes to
# the one key the call names; and two earlier ones that took the order number
# as an argument (consumed list first, or last). A probe call must grant a
# packet first; if no layout does, it prints nothing and the row is reported
# as skipped.
bench_shipped() {
	local tag="{$PREFIX:rb}" sha reply now far layout replid
	local meta=$tag:meta pool=$tag:pool claims=$tag:claims consumed=$tag:consumed orders=$tag:orders
	local recipients=$tag:recipients
	rcli DEL "$meta" "$pool" "$claims" "$consumed" "$orders" "$recipients" >/dev/null
	now=$(($(date +%s) * 1000))
	far=$((now + 3600 * 1000))
	rcli HSET "$meta" status open expires "$far" count "$((RB_REQUESTS + 2))" total "$((RB_REQUESTS * 200))" grabbed_cents 0 \
		starts 0 password "" recipients 0 buckets 1 claimed 0 >/dev/null
	replid=$(rcli INFO replication | tr -d '\r' | sed -n 's/^master_replid://p')
	rcli HSET "$orders" counter 0 ceiling 1000000000 identity "$replid" >/dev/null
	fill_pool "$pool" "$((RB_REQUESTS + 2))" plain
	sha=$(rcli SCRIPT LOAD "$(cat internal/redisstore/grab.lua)")
	reply=$(rcli EVALSHA "$sha" 6 "$consumed" "$orders" "$meta" "$pool" "$claims" "$recipients" 20261121 10 1 1 100000000 probe-$RANDOM "$now" 1 "" 1 0 2>/dev/null | head -3 | tr '\n' ' ')
	if [[ $reply == "0 "*" 0 "* ]]; then
		redis_bench 1 EVALSHA "$sha" 6 "$consumed" "$orders" "$meta" "$pool" "$claims" "$recipients" 20261121 10 1 1 100000000 u:__rand_int__ "$now" 1 "" 1 0
	else
		reply=
		for layout in "$consumed $meta $pool $claims" "$meta $pool $claims $consumed"; do
			# shellcheck disable=SC2086 # the layout is four key names
			reply=$(rcli EVALSHA "$sha" 4 $layout probe-$RANDOM "$now" 1 202611210000000001 2>/dev/null | head -1)
			if [[ $reply == 0 ]]; then
				# shellcheck disable=SC2086
				redis_bench 1 EVALSHA "$sha" 4 $layout u:__rand_int__ "$now" 1 202611210000000002
				break
			fi
		done
		if [[ $reply != 0 ]]; then
			echo "bench: (a') skipped: grab.lua granted nothing with any known KEYS/ARGV layout" \
				"(the current one answered: $(rcli EVALSHA "$sha" 6 "$consumed" "$orders" "$meta" "$pool" "$claims" \
					"$recipients" 20261121 10 1 1 100000000 probe-$RANDOM "$now" 1 "" 1 0 2>&1 | head -1));" \
				"update bench_shipped in bench/run.sh to the script's header" >&2
		fi
	fi
	rcli DEL "$meta" "$pool" "$claims" "$consumed" "$orders" "$recipients" >/dev/null
}

# gobench runs one Go benchmark and prints the value of each unit asked for,
# in order ("ns/op", "claims/s", ...); the tests find the servers through the
# TEST_* variables.
gobench() {
	local pkg=$1 bench=$2 times=$3
	shift 3
	TEST_REDIS_URL=$REDIS_URL TEST_DATABASE_URL=$DATABASE_URL \
		timeout 600 go test -run=NONE -bench="$bench" -benchtime="$times" "$pkg" |
		awk -v units="$*" '/^Benchmark/ { n = split(units, u, " "); for (i = 1; i <= n; i++) for (j = 3; j < NF; j++) if ($(j + 1) == u[i]) v[i] = $j }
			END { n = split(units, u, " "); out = ""; for (i = 1; i <= n; i++) out = out (i > 1 ? " " : "") (v[i] == "" ? "null" : v[i]); print out }'
}

loadgen_args=(-users "$USERS" -duration "$DURATION" -repeat 0.1 -json)
if [[ -n $GRABS ]]; then
	loadgen_args+=(-grabs "$GRABS")
fi

echo "bench: building" >&2
go build -o "$WORK/bin/" ./cmd/...
BIN=$WORK/bin
delete_keys

echo "bench: (a) original.lua under redis-benchmark, $RB_REQUESTS calls, -c $USERS" >&2
read -r A1_RPS A1_P50 A1_P99 <<<"$(bench_original 1)"
read -r A16_RPS A16_P50 A16_P99 <<<"$(bench_original 16)"
echo "bench: (a') grab.lua under redis-benchmark" >&2
read -r AS_RPS AS_P50 AS_P99 <<<"$(bench_shipped)" || true

echo "bench: (d) grab service in process, (e) flusher drain, (f) create, (g) memory" >&2
read -r D_NS <<<"$(gobench ./internal/grab 'BenchmarkServiceGrab/batch=64$' 200000x ns/op)"
read -r E_CPS <<<"$(gobench ./internal/flush 'BenchmarkDrain/batch=2000$' 2x claims/s)"
read -r F_NS <<<"$(gobench ./internal/grab 'BenchmarkCreate$' 5x ns/op)"
read -r G_POOL G_UNFLUSHED G_CLAIM <<<"$(gobench ./internal/redisstore 'BenchmarkMemoryPerPacket$' 1x B/pooled B/waiting B/claim)"

echo "bench: (b) loadgen -> noop-server for $DURATION" >&2
NOOP_ADDR=127.0.0.1:$(free_port)
start noop "$BIN/loadgen" noop-server -addr "$NOOP_ADDR"
wait_ready "http://$NOOP_ADDR/readyz"
timeout 600 "$BIN/loadgen" -url "http://$NOOP_ADDR" -noop "${loadgen_args[@]}" >"$WORK/noop.json"

echo "bench: (c) loadgen -> grabber + flusher for $DURATION ($ENVELOPES x $PACKETS packets)" >&2
psql "$DATABASE_URL" -qX -v ON_ERROR_STOP=1 \
	-c "DROP DATABASE IF EXISTS $BENCH_DB WITH (FORCE)" -c "CREATE DATABASE $BENCH_DB" >/dev/null
GRABBER_ADDR=127.0.0.1:$(free_port)
FLUSHER_ADDR=127.0.0.1:$(free_port)
export DATABASE_URL=$BENCH_DB_URL REDIS_URL REDIS_KEY_PREFIX=$PREFIX GRABBER_ADDR FLUSHER_ADDR
unset REDIS_CLUSTER_ADDRS GRABBER_API_TOKEN
timeout 120 "$BIN/flusher" migrate >"$WORK/migrate.log" 2>&1
start flusher "$BIN/flusher"
start grabber "$BIN/grabber"
wait_ready "http://$FLUSHER_ADDR/readyz"
wait_ready "http://$GRABBER_ADDR/readyz"
set +e
timeout 900 "$BIN/loadgen" -url "http://$GRABBER_ADDR" -database-url "$BENCH_DB_URL" \
	-envelopes "$ENVELOPES" -packets "$PACKETS" -total-cents "$((PACKETS * 200))" -expires 1h \
	"${loadgen_args[@]}" >"$WORK/grabber.json"
GRABBER_EXIT=$?
set -e

# The report.
DATE=$(date -u +%F)
# BENCH_COMMIT names the code when it is not a git checkout (an export, say).
if [[ -n ${BENCH_COMMIT:-} ]]; then
	COMMIT=$BENCH_COMMIT
else
	COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
	[[ -n $(git status --porcelain 2>/dev/null) ]] && COMMIT="$COMMIT (working tree has changes)"
fi
mkdir -p bench/results
OUT=bench/results/$DATE
num() { [[ -n ${1:-} ]] && echo "$1" || echo null; }
jq -n --arg date "$(date -u +%FT%TZ)" --arg commit "$COMMIT" --arg cpus "$(nproc)" \
	--arg load "$(cut -d' ' -f1-3 /proc/loadavg)" --argjson users "$USERS" \
	--argjson a1 "{\"rps\": $(num "$A1_RPS"), \"p50_ms\": $(num "$A1_P50"), \"p99_ms\": $(num "$A1_P99"), \"pipeline\": 1}" \
	--argjson a16 "{\"rps\": $(num "$A16_RPS"), \"p50_ms\": $(num "$A16_P50"), \"p99_ms\": $(num "$A16_P99"), \"pipeline\": 16}" \
	--argjson ship "{\"rps\": $(num "${AS_RPS:-}"), \"p50_ms\": $(num "${AS_P50:-}"), \"p99_ms\": $(num "${AS_P99:-}"), \"pipeline\": 1}" \
	--argjson inproc "{\"ns_per_grab\": $(num "$D_NS"), \"drain_claims_per_s\": $(num "$E_CPS"), \"create_100k_ns\": $(num "$F_NS"), \"bytes_per_pooled_packet\": $(num "$G_POOL"), \"bytes_per_unflushed_grab\": $(num "$G_UNFLUSHED"), \"bytes_per_kept_claim\": $(num "$G_CLAIM")}" \
	--argjson exit "$GRABBER_EXIT" --slurpfile noop "$WORK/noop.json" --slurpfile grabber "$WORK/grabber.json" \
	'{date: $date, commit: $commit, cpus: ($cpus | tonumber), load_average: $load, users: $users,
	  redis_benchmark_requests: '"$RB_REQUESTS"',
	  original_lua: $a1, original_lua_pipelined: $a16, shipped_grab_lua: $ship,
	  noop_server: $noop[0], grabber: ($grabber[0] + {exit_status: $exit}), in_process: $inproc}' >"$OUT.json"

jq -r '
	def f0: if . == null then "n/a" else (. * 1 | round | tostring) end;
	def f2: if . == null then "n/a" else ((. * 100 | round) / 100 | tostring) end;
	def ratio(a; b): if a == null or b == null or b == 0 then "n/a" else ((a / b * 1000 | round) / 1000 | tostring) end;
	def row(name; rps; p50; p99): "\(name)\t\(rps | f0)\t\(p50 | f2)\t\(p99 | f2)";
	.grabber as $g | .noop_server as $n |
	"same-run references, \(.date), commit \(.commit), \(.cpus) cpus, load \(.load_average), \(.users) concurrent clients",
	"",
	"part\tcalls/s\tp50 ms\tp99 ms",
	row("(a) original.lua, redis-benchmark"; .original_lua.rps; .original_lua.p50_ms; .original_lua.p99_ms),
	row("(a) original.lua, redis-benchmark -P 16"; .original_lua_pipelined.rps; .original_lua_pipelined.p50_ms; .original_lua_pipelined.p99_ms),
	row("(a'"'"') grab.lua, redis-benchmark"; .shipped_grab_lua.rps; .shipped_grab_lua.p50_ms; .shipped_grab_lua.p99_ms),
	row("(b) loadgen -> noop-server (HTTP only)"; $n.grabs_per_s; $n.latency.p50_us / 1000; $n.latency.p99_us / 1000),
	row("(c) loadgen -> grabber (+Redis, flusher, PG)"; $g.grabs_per_s; $g.latency.p50_us / 1000; $g.latency.p99_us / 1000),
	row("(d) grab service in process, 64 callers"; (if .in_process.ns_per_grab then 1e9 / .in_process.ns_per_grab else null end); null; null),
	"",
	"(e) flusher drain, batches of 2000\t\(.in_process.drain_claims_per_s | f0) claims/s",
	"(f) create a 100,000-packet envelope\t\(if .in_process.create_100k_ns then .in_process.create_100k_ns / 1e6 | f0 else "n/a" end) ms",
	"(g) Redis bytes: pooled packet / unflushed grab / kept claim\t\(.in_process.bytes_per_pooled_packet | f2) / \(.in_process.bytes_per_unflushed_grab | f2) / \(.in_process.bytes_per_kept_claim | f2)",
	"",
	"ratio\tours/reference",
	"(c) / (b)  grabber vs no-op HTTP server\t\(ratio($g.grabs_per_s; $n.grabs_per_s))",
	"(c) / (a)  grabber vs original.lua, no pipelining\t\(ratio($g.grabs_per_s; .original_lua.rps))",
	"(c) / (a) -P 16\t\(ratio($g.grabs_per_s; .original_lua_pipelined.rps))",
	"(d) / (a)  grab service in process vs original.lua\t\(ratio((if .in_process.ns_per_grab then 1e9 / .in_process.ns_per_grab else null end); .original_lua.rps))",
	"(a'"'"') / (a)  grab.lua vs original.lua, script only\t\(ratio(.shipped_grab_lua.rps; .original_lua.rps))",
	"",
	"(c) detail: \($g.grabs) grabs in \($g.elapsed_s | f2)s, stopped by \($g.stop_reason); granted \($g.granted); errors \($g.errors); violations \($g.violation_count); exit \($g.exit_status)",
	"(c) flush lag p50 \($g.flush.lag.p50_ms | f0) ms, p99 \($g.flush.lag.p99_ms | f0) ms, max \($g.flush.lag.max_ms | f0) ms; last grant -> PostgreSQL holds every claim: \($g.flush.last_grant_to_all_in_pg_ms | f0) ms (complete: \($g.flush.complete))",
	"(b) detail: \($n.grabs) grabs in \($n.elapsed_s | f2)s, stopped by \($n.stop_reason); errors \($n.errors)"
' "$OUT.json" | awk -F'\t' '{ if (NF > 1) { printf "%-50s", $1; for (i = 2; i <= NF; i++) printf "%12s", $i; print "" } else print }' | tee "$OUT.txt"
"$BIN/loadgen" bench-page -in "$OUT.json" -out "$OUT.html"
# A picture of the page, for readers of the repository.
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [[ -n $CHROMIUM ]]; then
	timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--user-data-dir="$WORK/chromium" --window-size=900,2300 --screenshot="$OUT.png" \
		"file://$PWD/$OUT.html" >/dev/null 2>&1 || echo "bench: no screenshot (chromium failed)" >&2
fi
echo "bench: wrote $OUT.txt, $OUT.json and $OUT.html" >&2
exit "$GRABBER_EXIT"
