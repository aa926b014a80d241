# Common tasks. The tests need PostgreSQL and Redis: see the README.
.PHONY: build test vet run-grabber run-flusher migrate fuzz bench

BIN := bin

build:
	go build -o $(BIN)/ ./cmd/...

test:
	go test -race ./...

vet:
	gofmt -l . | (! grep .) && go vet ./...

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
