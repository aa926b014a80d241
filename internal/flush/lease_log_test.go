package flush

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"redpacket/internal/testenv"
)

// A flusher starting alone takes every shard in its first refresh and says
// so in one line, not one per shard; a refresh that changes nothing says
// nothing; one that gives shards up to a newcomer says so in one line.
func TestLeasesLogOneLinePerChange(t *testing.T) {
	t.Parallel()
	_, url := testenv.Postgres(t)
	const shards = 16
	core, logs := observer.New(zap.InfoLevel)
	a := NewLeases(url, shards, zap.New(core))
	defer a.Close()
	if _, err := a.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	lines := logs.TakeAll()
	if len(lines) != 1 || lines[0].Message != "took shard leases" {
		t.Fatalf("lines %v, want one: took shard leases", lines)
	}
	if took, ok := lines[0].ContextMap()["took"].([]any); !ok || len(took) != shards {
		t.Fatalf("took %v, want all %d shards", lines[0].ContextMap()["took"], shards)
	}

	b := NewLeases(url, shards, zap.NewNop())
	defer b.Close()
	if _, err := b.Refresh(t.Context()); err != nil { // joins: counted from now on
		t.Fatal(err)
	}
	if _, err := a.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	lines = logs.TakeAll()
	if len(lines) != 1 || lines[0].Message != "gave up shard leases to other flushers" {
		t.Fatalf("lines %v, want one: gave up shard leases to other flushers", lines)
	}
	if gave, ok := lines[0].ContextMap()["gave_up"].([]any); !ok || len(gave) != shards/2 {
		t.Fatalf("gave_up %v, want %d shards", lines[0].ContextMap()["gave_up"], shards/2)
	}
}
