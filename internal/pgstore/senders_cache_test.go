package pgstore

import (
	"slices"
	"testing"

	"redpacket/internal/db/dbsqlc"
)

// A writer asks what the cache lacks (envelope 2; envelope 1 is cached),
// then another writer's add fills the cache and starts it over, losing
// envelope 1. Filling the first writer's rows must not give envelope 1's
// claim a NULL sender: fill names it as lost, for the writer to look up.
func TestSenderCacheStartedOverBetweenMissingAndFill(t *testing.T) {
	c := newSenderCache()
	c.add([]dbsqlc.EnvelopeSendersRow{{ID: 1, SenderID: "alice"}})
	claims := []Claim{{EnvelopeID: 1, PacketID: 10}, {EnvelopeID: 2, PacketID: 20}, {EnvelopeID: 1, PacketID: 11}}
	if got := c.missing(claims); !slices.Equal(got, []int64{2}) {
		t.Fatalf("missing = %v, want [2]", got)
	}
	other := make([]dbsqlc.EnvelopeSendersRow, senderCacheSize)
	for i := range other {
		other[i] = dbsqlc.EnvelopeSendersRow{ID: int64(1000 + i), SenderID: "other"}
	}
	c.add(other) // the other writer's lookup: the cache starts over

	rows := copyRows(claims)
	bob := "bob"
	lost := c.fill(rows, map[int64]*string{2: &bob})
	if !slices.Equal(lost, []int64{1}) {
		t.Fatalf("fill after the cache started over reports %v lost, want [1]", lost)
	}
	alice := "alice"
	if lost := c.fill(rows, map[int64]*string{1: &alice, 2: &bob}); len(lost) != 0 {
		t.Fatalf("fill with both looked up reports %v lost", lost)
	}
	for _, r := range rows {
		if r.SenderID == nil {
			t.Fatalf("claim of packet %d has no sender", r.PacketID)
		}
	}
	if got := *rows[1].SenderID; got != "bob" {
		t.Errorf("envelope 2's claim carries %s, want bob", got)
	}
}
