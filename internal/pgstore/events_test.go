package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/pgstore"
)

// allEvents reads every event in id order.
func allEvents(t testing.TB, s *pgstore.Store) []pgstore.Event {
	t.Helper()
	evs, err := s.EventsAfter(t.Context(), 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// eventsSince returns the events after the given id, as "type envelope data".
func eventsSince(t testing.TB, s *pgstore.Store, after int64) []string {
	t.Helper()
	evs, err := s.EventsAfter(t.Context(), after, 100000)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%s %d %s", e.Type, e.EnvelopeID, canonical(t, e.Data))
	}
	return out
}

// lastEventID is the highest event id so far (0 for none).
func lastEventID(t testing.TB, s *pgstore.Store) int64 {
	t.Helper()
	evs := allEvents(t, s)
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].ID
}

// canonical re-encodes a JSON object with sorted keys.
func canonical(t testing.TB, data []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("event data %q: %v", data, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func wantEvents(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(want) == 0 {
		want = []string{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func jsonTime(tm time.Time) string { return tm.UTC().Format("2006-01-02T15:04:05.000Z") }

func claimedEvent(c pgstore.Claim, amount int64) string {
	order := "null"
	if c.OrderNo != "" {
		order = `"` + c.OrderNo + `"`
	}
	return fmt.Sprintf(`packet.claimed %d {"amount_cents":%d,"envelope_id":%d,"grabbed_at":"%s","metadata":{},"order_no":%s,"packet_id":%d,"user_id":"%s"}`,
		c.EnvelopeID, amount, c.EnvelopeID, jsonTime(c.ClaimedAt), order, c.PacketID, c.UserID)
}

// soldOutEvent is an envelope.sold_out event whose luckiest grab is best
// (bestOf).
func soldOutEvent(env int64, count int, total int64, best string) string {
	return fmt.Sprintf(`envelope.sold_out %d {"best":%s,"count":%d,"envelope_id":%d,"metadata":{},"total_cents":%d}`, env, best, count, env, total)
}

// bestOf is claim c of amount cents as the best member of an event.
func bestOf(c pgstore.Claim, amount int64) string {
	order := "null"
	if c.OrderNo != "" {
		order = `"` + c.OrderNo + `"`
	}
	return fmt.Sprintf(`{"amount_cents":%d,"grabbed_at":"%s","order_no":%s,"packet_id":%d,"user_id":"%s"}`,
		amount, jsonTime(c.ClaimedAt), order, c.PacketID, c.UserID)
}

// Every packet a batch newly claims gets one packet.claimed event, the
// envelope it sells out one envelope.sold_out after them; replays, conflicts
// and claims on an envelope that does not change write nothing.
func TestApplyClaimsEvents(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	open(t, s, 1, 100, []int64{10, 20, 30})
	a, b := claim(1, 100, "alice"), claim(1, 101, "bob")
	a.OrderNo, b.OrderNo = "203005170000000001", "203005170000000002"
	// Milliseconds and below: the event keeps milliseconds, as the API does.
	b.ClaimedAt = b.ClaimedAt.Add(1234567 * time.Nanosecond)
	apply(t, s, a, b)
	wantEvents(t, eventsSince(t, s, 0), claimedEvent(a, 10), claimedEvent(b, 20))

	mark := lastEventID(t, s)
	for range 2 {
		apply(t, s, a, b)
	}
	wantEvents(t, eventsSince(t, s, mark))
	if res := apply(t, s, claim(1, 100, "mallory")); len(res.Conflicts) != 1 {
		t.Fatalf("conflict not reported: %+v", res)
	}
	wantEvents(t, eventsSince(t, s, mark))

	c := claim(1, 102, "carol")
	apply(t, s, a, c) // a replayed with the last claim
	wantEvents(t, eventsSince(t, s, mark), claimedEvent(c, 30), soldOutEvent(1, 3, 60, bestOf(c, 30)))
	mark = lastEventID(t, s)
	apply(t, s, c)
	wantEvents(t, eventsSince(t, s, mark))

	// Ids are consecutive from 1.
	for i, e := range allEvents(t, s) {
		if e.ID != int64(i+1) {
			t.Errorf("event %d has id %d", i, e.ID)
		}
	}
}

// Claims written one statement at a time (a batch PostgreSQL refused as a
// whole) get their events the same way; a claim lost to a used order number
// is claimed without it.
func TestApplyClaimsEventsSinglesAndOrderNo(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	open(t, s, 1, 100, []int64{5, 6, 7})
	first, twice := claim(1, 100, "ann"), claim(1, 101, "ann")
	first.OrderNo = "203005170000000009"
	other := claim(1, 102, "ben")
	other.OrderNo = first.OrderNo
	res := apply(t, s, first, twice, other)
	if res.Applied != 2 || len(res.Conflicts) != 2 {
		t.Fatalf("apply = %+v, want 2 applied and 2 conflicts", res)
	}
	other.OrderNo = ""
	wantEvents(t, eventsSince(t, s, 0), claimedEvent(first, 5), claimedEvent(other, 7))
}

func TestSettleEvents(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	open(t, s, 1, 100, []int64{10, 20, 30})
	apply(t, s, claim(1, 100, "a"))
	mark := lastEventID(t, s)
	at := t0.Add(time.Hour + 7*time.Millisecond)
	if _, err := s.Settle(t.Context(), 1, at, "open"); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, eventsSince(t, s, mark), fmt.Sprintf(`envelope.settled 1 {"best":%s,"claimed_cents":10,"envelope_id":1,"metadata":{},`+
		`"refunded_cents":50,"sender_id":"sender-1","settled_at":"%s","status":"settled","total_cents":60}`,
		bestOf(claim(1, 100, "a"), 10), jsonTime(at)))

	mark = lastEventID(t, s)
	if _, err := s.Settle(t.Context(), 1, at, "open"); !errors.Is(err, pgstore.ErrWrongStatus) {
		t.Fatalf("second settle: %v", err)
	}
	wantEvents(t, eventsSince(t, s, mark))

	// A refused settlement (cents disagree with packets) writes no event.
	open(t, s, 2, 200, []int64{4, 4})
	if _, err := pool.Exec(t.Context(), `UPDATE envelopes SET claimed_cents = 4 WHERE id = 2`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settle(t.Context(), 2, at, "open"); !errors.Is(err, pgstore.ErrLedger) {
		t.Fatalf("settle of a broken ledger: %v", err)
	}
	wantEvents(t, eventsSince(t, s, mark))

	// An envelope that never finished loading fails: everything refunded.
	insert(t, s, 3, 300, []int64{1, 2}, t0)
	if _, err := s.FailLoading(t.Context(), 3, at); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, eventsSince(t, s, mark), fmt.Sprintf(`envelope.settled 3 {"best":null,"claimed_cents":0,"envelope_id":3,"metadata":{},`+
		`"refunded_cents":3,"sender_id":"sender-1","settled_at":"%s","status":"failed","total_cents":3}`, jsonTime(at)))
}

func TestSuspendReopenEvents(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	open(t, s, 1, 100, []int64{10, 20})
	at := t0.Add(time.Minute)
	suspended := fmt.Sprintf(`envelope.suspended 1 {"envelope_id":1,"metadata":{},"reason":"redis lost it","suspended_at":"%s"}`, jsonTime(at))
	for i := range 2 {
		changed, err := s.Suspend(t.Context(), 1, "redis lost it", at)
		if err != nil || changed != (i == 0) {
			t.Fatalf("Suspend #%d = %v, %v", i+1, changed, err)
		}
	}
	wantEvents(t, eventsSince(t, s, 0), suspended)

	if status, err := s.Reopen(t.Context(), 1); err != nil || status != "open" {
		t.Fatalf("Reopen = %q, %v", status, err)
	}
	if _, err := s.Reopen(t.Context(), 1); !errors.Is(err, pgstore.ErrWrongStatus) {
		t.Fatalf("second Reopen: %v", err)
	}
	wantEvents(t, eventsSince(t, s, 0), suspended, `envelope.recovered 1 {"action":"reload","envelope_id":1,"metadata":{},"status":"open"}`)

	// Its last claims reach PostgreSQL while it is suspended: no sold_out
	// then, so the reload that finds it sold out writes one.
	mark := lastEventID(t, s)
	if _, err := s.Suspend(t.Context(), 1, "again", at); err != nil {
		t.Fatal(err)
	}
	a, b := claim(1, 100, "a"), claim(1, 101, "b")
	apply(t, s, a, b)
	if status, err := s.Reopen(t.Context(), 1); err != nil || status != "sold_out" {
		t.Fatalf("Reopen = %q, %v", status, err)
	}
	got := eventsSince(t, s, mark)
	wantEvents(t, got[1:], claimedEvent(a, 10), claimedEvent(b, 20),
		`envelope.recovered 1 {"action":"reload","envelope_id":1,"metadata":{},"status":"sold_out"}`, soldOutEvent(1, 2, 30, bestOf(b, 20)))

	// Suspended again once sold out (a conflict, say) and reloaded: it sold
	// out once, and its backend is told so once.
	mark = lastEventID(t, s)
	if _, err := s.Suspend(t.Context(), 1, "a conflict", at); err != nil {
		t.Fatal(err)
	}
	if status, err := s.Reopen(t.Context(), 1); err != nil || status != "sold_out" {
		t.Fatalf("Reopen = %q, %v", status, err)
	}
	got = eventsSince(t, s, mark)
	wantEvents(t, got[1:], `envelope.recovered 1 {"action":"reload","envelope_id":1,"metadata":{},"status":"sold_out"}`)
}

// An envelope whose packets were all claimed while it was still loading sells
// out when it is marked loaded, once.
func TestMarkLoadedSoldOutEvent(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	insert(t, s, 1, 100, []int64{3, 4}, t0)
	a, b := claim(1, 100, "a"), claim(1, 101, "b")
	apply(t, s, a, b)
	for range 2 {
		if status, err := s.MarkLoaded(t.Context(), 1); err != nil || status != "sold_out" {
			t.Fatalf("MarkLoaded = %q, %v", status, err)
		}
	}
	wantEvents(t, eventsSince(t, s, 0), claimedEvent(a, 3), claimedEvent(b, 4), soldOutEvent(1, 2, 7, bestOf(b, 4)))

	open(t, s, 2, 200, []int64{3})
	wantEvents(t, eventsSince(t, s, 3))
}

// Committed events are announced on the channel with the highest id; a
// statement that writes none announces nothing.
func TestEventsNotify(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	open(t, s, 1, 100, []int64{1, 1, 1})
	conn := listen(t, pool)
	apply(t, s, claim(1, 100, "a"), claim(1, 101, "b"))
	n := waitNotification(t, conn, time.Second)
	if n == nil || n.Channel != pgstore.EventsChannel || n.Payload != "2" {
		t.Fatalf("notification = %+v, want payload 2 on %s", n, pgstore.EventsChannel)
	}
	apply(t, s, claim(1, 100, "a"))
	if _, err := s.Suspend(t.Context(), 99, "no such envelope", t0); err != nil {
		t.Fatal(err)
	}
	if n := waitNotification(t, conn, 300*time.Millisecond); n != nil {
		t.Fatalf("a replay announced %+v", n)
	}
}

func listen(t *testing.T, pool *pgxpool.Pool) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), "LISTEN "+pgstore.EventsChannel); err != nil {
		t.Fatal(err)
	}
	return conn
}

func waitNotification(t *testing.T, conn *pgx.Conn, d time.Duration) *pgxNotification {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	n, err := conn.WaitForNotification(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		t.Fatal(err)
	}
	return &pgxNotification{Channel: n.Channel, Payload: n.Payload}
}

type pgxNotification struct{ Channel, Payload string }
