# Common tasks. The tests need PostgreSQL and Redis: see the README.
.PHONY: build test vet run-grabber run-flusher migrate fuzz

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
