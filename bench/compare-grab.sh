#!/usr/bin/env bash
# Before/after comparison of the in-process grab path, in one run, against
# the same-run reference of bench/run.sh part (a): redis-benchmark of
# bench/original.lua (no pipelining, 50 clients, 200,000 calls).
#
#   bench/compare-grab.sh <before-tree> [rounds]
#
# <before-tree> is another checkout of the code (e.g. `git archive <commit> |
# tar -x -C /tmp/before`); this tree is "after". Each round runs the
# reference, BenchmarkServiceGrab/batch=64 (200,000 grabs) and batch=1
# (20,000) in each tree, and the reference again, so the figures of a round
# come from the same moments of a shared machine. Servers: TEST_REDIS_URL and
# TEST_DATABASE_URL (defaults as in bench/run.sh); the reference uses keys
# under gbref:, deleted after each run.
set -euo pipefail
BEFORE=${1:?usage: bench/compare-grab.sh <before-tree> [rounds]}
ROUNDS=${2:-5}
AFTER=$(cd "$(dirname "$0")/.." && pwd)
export TEST_REDIS_URL=${TEST_REDIS_URL:-redis://127.0.0.1:6379/0}
export TEST_DATABASE_URL=${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
rcli() { redis-cli -u "$TEST_REDIS_URL" "$@"; }

ref() {
	local pool=gbref:pool consumed=gbref:consumed users=gbref:users sha from to
	rcli DEL "$pool" "$consumed" "$users" >/dev/null
	for ((from = 1; from <= 200000; from += 10000)); do
		to=$((from + 9999))
		rcli EVAL "for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do
			redis.call('RPUSH', KEYS[1], cjson.encode({id = i, money = i % 200 + 1})) end" 1 "$pool" "$from" "$to" >/dev/null
	done
	sha=$(rcli SCRIPT LOAD "$(cat "$AFTER/bench/original.lua")")
	timeout 300 redis-benchmark -u "$TEST_REDIS_URL" -n 200000 -c 50 -P 1 -r 1000000000 --csv \
		EVALSHA "$sha" 3 "$pool" "$consumed" "$users" u:__rand_int__ |
		awk -F'","' 'NR == 2 { gsub(/"/, "", $NF); print $2 }'
	rcli DEL "$pool" "$consumed" "$users" >/dev/null
}

gob() { # tree benchmark times
	(cd "$1" && timeout 900 go test -run=NONE -bench="$2" -benchtime="$3" -benchmem ./internal/grab 2>&1 |
		awk '/^Benchmark/ { print $3, "ns/op", $5, "B/op", $7, "allocs/op" }')
}

for tree in "$BEFORE" "$AFTER"; do (cd "$tree" && go test -c -o /dev/null ./internal/grab); done
for round in $(seq "$ROUNDS"); do
	echo "round $round $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "  reference original.lua calls/s: $(ref)"
	echo "  batch=64 before: $(gob "$BEFORE" 'BenchmarkServiceGrab/batch=64$' 200000x)"
	echo "  batch=64 after:  $(gob "$AFTER" 'BenchmarkServiceGrab/batch=64$' 200000x)"
	echo "  batch=1  before: $(gob "$BEFORE" 'BenchmarkServiceGrab/batch=1$' 20000x)"
	echo "  batch=1  after:  $(gob "$AFTER" 'BenchmarkServiceGrab/batch=1$' 20000x)"
	echo "  reference original.lua calls/s: $(ref)"
done
