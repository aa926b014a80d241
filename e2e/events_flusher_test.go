package e2e_test

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"redpacket/internal/testenv"
)

// The flusher is SIGKILLed every 200-500 ms under a grab load, wherever it
// is (mid-batch, mid-settlement), and restarted. Afterwards the feed, read
// from 0 over HTTP, holds exactly one packet.claimed per packet PostgreSQL
// shows claimed, with that packet's user, amount, order number and time, and
// no other; one envelope.sold_out per envelope whose packets are all claimed;
// one envelope.settled per settled envelope, with its cents; nothing else.
func TestEventsFlusherKillLoop(t *testing.T) {
	t.Parallel()
	dbURL := testenv.PostgresURL(t)
	_, prefix := testenv.Redis(t)
	s := startStack(t, dbURL, testenv.RedisURL(t), prefix)
	// The small ones sell out and settle during the kills.
	_, ids := s.createEnvelopes(t, 3600, 150, 400, 1200, 3000)

	const loadFor = 5 * time.Second
	load := startLoad(t, s.base, ids, loadSpec{Workers: 6, For: loadFor, Max: 30000, Pace: 2 * time.Millisecond, Tag: "ev"})
	kills := killFlusherFor(t, s, loadFor)
	log := load.wait()
	t.Logf("flusher SIGKILLed %d times; load: %s", kills, log.summary())
	waitReady(t, s.flusherURL+"/readyz")
	assertLedger(t, s, ledgerSpec{Envelopes: ids, Logs: []*loadLog{log}, Wait: 30 * time.Second})

	evs := readFeedWhenQuiet(t, s.base, 1500*time.Millisecond, 30*time.Second)
	db := connectTestDB(t, dbURL)
	held := claimedPackets(t, db)
	t.Logf("%d events; %d packets claimed", len(evs), len(held))

	f := tallyFeed(t, evs, held)
	for p := range held {
		if !f.seenPacket[p] {
			t.Errorf("packet %d is claimed in PostgreSQL but has no packet.claimed event", p)
		}
	}
	for _, id := range ids {
		st := readEnvelopeState(t, db, id)
		if want := b2i(st.UnclaimedCount == 0 && st.RefundedCount == 0); f.soldOut[id] != want {
			t.Errorf("envelope %d (%+v): %d sold_out events, want %d", id, st, f.soldOut[id], want)
		}
		d, ok := f.settled[id]
		switch {
		case ok != (st.Status == "settled"):
			t.Errorf("envelope %d is %s; settled event: %v", id, st.Status, ok)
		case ok && (d.Status != "settled" || d.ClaimedCents != st.ClaimedCents || d.RefundedCents != st.RefundedCents ||
			d.ClaimedCents+d.RefundedCents != d.TotalCents || d.TotalCents != st.TotalCents):
			t.Errorf("envelope %d: settled event %+v, PostgreSQL %+v", id, d, st)
		}
	}
	t.Logf("events by type: %v", f.byType)
	s.stop(t)
}

// killFlusherFor SIGKILLs the flusher of s every 200-500 ms for d, starting
// it again each time; it returns how many times it did.
func killFlusherFor(t *testing.T, s *faultStack, d time.Duration) int {
	t.Helper()
	end := time.Now().Add(d)
	kills := 0
	for time.Now().Before(end) {
		time.Sleep(200*time.Millisecond + rand.N(300*time.Millisecond))
		killAndReap(t, s.flusher)
		s.flusher = start(t, "flusher", s.env)
		kills++
	}
	return kills
}

// feedTally is what the feed's events add up to.
type feedTally struct {
	byType     map[string]int
	seenPacket map[int64]bool        // packets with a packet.claimed event
	soldOut    map[int64]int         // envelope.sold_out events by envelope
	settled    map[int64]settledData // the envelope.settled event of each envelope
}

// tallyFeed fails the test for an event of an unexpected type, a packet or
// an envelope's settlement told twice, a claim PostgreSQL does not hold as
// told, or told after its envelope's sell-out.
func tallyFeed(t *testing.T, evs []feedEvent, held map[int64]heldPacket) feedTally {
	t.Helper()
	f := feedTally{byType: map[string]int{}, seenPacket: map[int64]bool{}, soldOut: map[int64]int{}, settled: map[int64]settledData{}}
	for _, e := range evs {
		f.byType[e.Type]++
		switch e.Type {
		case "packet.claimed":
			f.checkClaimed(t, e, held)
		case "envelope.sold_out":
			f.soldOut[e.EnvelopeID]++
		case "envelope.settled":
			var d settledData
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			if _, dup := f.settled[e.EnvelopeID]; dup {
				t.Errorf("envelope %d settled twice", e.EnvelopeID)
			}
			f.settled[e.EnvelopeID] = d
		default:
			t.Errorf("event %d: unexpected %s %s", e.ID, e.Type, e.Data)
		}
	}
	return f
}

// checkClaimed fails the test unless the packet.claimed event e is its
// packet's first, matches the claim PostgreSQL holds, and comes before its
// envelope's sell-out.
func (f feedTally) checkClaimed(t *testing.T, e feedEvent, held map[int64]heldPacket) {
	t.Helper()
	var d claimedData
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatal(err)
	}
	h, ok := held[d.PacketID]
	switch {
	case f.seenPacket[d.PacketID]:
		t.Errorf("packet %d has two packet.claimed events", d.PacketID)
	case !ok:
		t.Errorf("event %d: packet.claimed for packet %d, which PostgreSQL does not show claimed", e.ID, d.PacketID)
	case h.Envelope != e.EnvelopeID || d.EnvelopeID != e.EnvelopeID || h.User != d.UserID || h.Amount != d.AmountCents ||
		d.OrderNo == nil || h.OrderNo == nil || *h.OrderNo != *d.OrderNo || msTime(h.At) != d.GrabbedAt:
		t.Errorf("event %d: %s, PostgreSQL holds %+v", e.ID, e.Data, h)
	}
	f.seenPacket[d.PacketID] = true
	if f.soldOut[e.EnvelopeID] > 0 {
		t.Errorf("event %d: a claim of envelope %d after its sell-out", e.ID, e.EnvelopeID)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
