# Common tasks. The tests need PostgreSQL and Redis: see the README.
.PHONY: build test stress vet lint dev sqlc run-grabber run-flusher migrate fuzz bench

BIN := bin

# What `grabber -version` and `flusher -version` print.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X redpacket/internal/telemetry.version=$(VERSION) -X redpacket/internal/telemetry.commit=$(COMMIT)

build:
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

test:
	go test -race ./...

# The packages that coordinate processes (flush, events, ids, e2e), twice
# under -race; names every test that failed even once. CI runs it too.
stress:
	bash .ci/stress

vet:
	gofmt -l . | (! grep .) && go vet ./...

# golangci-lint v2 with .golangci.yml (errcheck, govet, ineffassign,
# staticcheck, unused); CI runs it and fails on any finding.
lint:
	bash .ci/lint

# The whole service on this machine, without Docker: DATABASE_URL and
# REDIS_URL if both are set, throwaway PostgreSQL and Redis servers if
# neither is (one alone is refused); the
# schema migrated, a grabber and a flusher. Ctrl-C stops everything.
dev: build
	$(BIN)/devenv

# Regenerate the query layer (internal/db/dbsqlc) after changing a query in
# internal/db/query or a migration (CONTRIBUTING.md). CI checks it is current.
sqlc:
	bash .ci/sqlc generate

migrate: build
	$(BIN)/flusher migrate

run-grabber: build
	$(BIN)/grabber

run-flusher: build
	$(BIN)/flusher

# Longer fuzzing runs than the seed corpus `go test` replays.
fuzz:
	go test -run=NONE -fuzz=FuzzSplit -fuzztime=60s ./internal/envelope
	go test -run=NONE -fuzz=FuzzAPI -fuzztime=60s ./internal/httpapi

# Same-run references for the grab path: redis-benchmark on the original
# script, loadgen on the no-op server and on grabber + flusher (BENCHMARKS.md).
bench:
	bash bench/run.sh
