package e2e_test

// Helpers of the events tests (events_*_test.go): a deployment with extra
// settings, and the feed read over HTTP.

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// startStackWith starts a flusher and a grabber as startStack does, with
// extra settings for both.
func startStackWith(t *testing.T, dbURL, redisURL, prefix string, extra ...string) *faultStack {
	t.Helper()
	grabberAddr, flusherAddr := freeAddr(t), freeAddr(t)
	s := &faultStack{
		db:         dbURL,
		env:        append(faultEnv(dbURL, redisURL, prefix, grabberAddr, flusherAddr), extra...),
		base:       "http://" + grabberAddr,
		flusherURL: "http://" + flusherAddr,
	}
	s.flusher = start(t, "flusher", s.env)
	waitReady(t, s.flusherURL+"/readyz")
	s.grabber = start(t, "grabber", s.env)
	waitReady(t, s.base+"/readyz")
	return s
}

// feedEvent is an event as GET /v1/events and the webhooks send it.
type feedEvent struct {
	ID         int64           `json:"id"`
	Type       string          `json:"type"`
	EnvelopeID int64           `json:"envelope_id"`
	Data       json.RawMessage `json:"data"`
	CreatedAt  string          `json:"created_at"`
}

// claimedData is the data of a packet.claimed event.
type claimedData struct {
	EnvelopeID  int64   `json:"envelope_id"`
	PacketID    int64   `json:"packet_id"`
	UserID      string  `json:"user_id"`
	AmountCents int64   `json:"amount_cents"`
	OrderNo     *string `json:"order_no"`
	GrabbedAt   string  `json:"grabbed_at"`
}

// settledData is the data of an envelope.settled event.
type settledData struct {
	EnvelopeID    int64  `json:"envelope_id"`
	SenderID      string `json:"sender_id"`
	Status        string `json:"status"`
	TotalCents    int64  `json:"total_cents"`
	ClaimedCents  int64  `json:"claimed_cents"`
	RefundedCents int64  `json:"refunded_cents"`
	SettledAt     string `json:"settled_at"`
}

// readFeed reads the whole feed from cursor 0, a page at a time, failing
// the test on a gap or a repeat.
func readFeed(t *testing.T, base string) []feedEvent {
	t.Helper()
	var all []feedEvent
	var cursor int64
	for {
		var page struct {
			Events    []feedEvent `json:"events"`
			NextAfter int64       `json:"next_after"`
		}
		if code := call(t, "GET", fmt.Sprintf("%s/v1/events?after=%d&limit=1000", base, cursor), "", "", &page); code != 200 {
			t.Fatalf("GET /v1/events?after=%d: %d", cursor, code)
		}
		for _, e := range page.Events {
			if e.ID != cursor+1 {
				t.Fatalf("the feed answered event %d after %d", e.ID, cursor)
			}
			cursor = e.ID
			all = append(all, e)
		}
		if page.NextAfter != cursor {
			t.Fatalf("next_after %d, last event %d", page.NextAfter, cursor)
		}
		if len(page.Events) == 0 {
			return all
		}
	}
}

// readFeedWhenQuiet reads the feed once no event has been added for quiet.
func readFeedWhenQuiet(t *testing.T, base string, quiet, atMost time.Duration) []feedEvent {
	t.Helper()
	deadline := time.Now().Add(atMost)
	evs := readFeed(t, base)
	for {
		time.Sleep(quiet)
		again := readFeed(t, base)
		if len(again) == len(evs) {
			return again
		}
		if time.Now().After(deadline) {
			t.Fatalf("events still being added after %s", atMost)
		}
		evs = again
	}
}

// heldPacket is a claimed packet as PostgreSQL holds it.
type heldPacket struct {
	Envelope int64
	User     string
	Amount   int64
	OrderNo  *string
	At       time.Time
}

func claimedPackets(t *testing.T, c *pgx.Conn) map[int64]heldPacket {
	t.Helper()
	rows, err := c.Query(context.Background(), `SELECT id, envelope_id, claimed_by, amount_cents, order_no, claimed_at
		FROM packets WHERE claimed_by IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]heldPacket{}
	var id int64
	var h heldPacket
	if _, err := pgx.ForEachRow(rows, []any{&id, &h.Envelope, &h.User, &h.Amount, &h.OrderNo, &h.At}, func() error {
		out[id] = h
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// msTime is the API's time format.
func msTime(tm time.Time) string { return tm.UTC().Format("2006-01-02T15:04:05.000Z") }
