package migrations_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/pgstore"
	"redpacket/migrations"
)

// Migration 16 moves the claims off the packet rows with nothing lost:
// the packets view and the events read the same before and after, a batch
// in flight across the upgrade (one claim the old flusher committed but
// did not acknowledge in Redis, one it never wrote) is applied once by the
// new claim write, and going back down keeps the claims written since.
func TestClaimsSurviveTheMoveToTheirTable(t *testing.T) {
	t.Parallel()
	m, dbURL := downTo(t, 15)
	c := connect(t, dbURL)
	ctx := t.Context()
	at := time.Date(2030, 5, 17, 8, 0, 0, 0, time.UTC)
	for _, q := range []string{
		`INSERT INTO envelopes (id, shard, sender_id, total_cents, count, status, expires_at, claimed_cents, kind,
		     best_packet_id, best_amount_cents)
		 VALUES (1, 1, 's', 60, 3, 'open', $1::timestamptz + interval '1 day', 30, 'random', 101, 20)`,
		`INSERT INTO envelopes (id, shard, sender_id, total_cents, count, status, expires_at, claimed_cents,
		     refunded_cents, settled_at, kind, best_packet_id, best_amount_cents)
		 VALUES (2, 2, 's', 10, 2, 'settled', $1, 5, 5, $1, 'random', 200, 5)`,
		`INSERT INTO packets (id, envelope_id, amount_cents, claimed_by, claimed_at, order_no, refunded_at) VALUES
		 (100, 1, 10, 'a', $1, '203005170000000001', NULL), (101, 1, 20, 'b', $1 + interval '1 second', '203005170000000002', NULL),
		 (102, 1, 30, NULL, NULL, NULL, NULL), (200, 2, 5, 'a', $1, '203005170000000003', NULL),
		 (201, 2, 5, NULL, NULL, NULL, $1)`,
		`INSERT INTO events (id, type, envelope_id, packet_id) VALUES (1, 'packet.claimed', 1, 100),
		 (2, 'packet.claimed', 1, 101), (3, 'packet.claimed', 2, 200)`,
		`UPDATE sequence_numbers SET current_value = 3 WHERE key_name = 'event'`,
	} {
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, at)
		}
		if _, err := c.Exec(ctx, q, args...); err != nil {
			t.Fatalf("seed: %v\n%s", err, q)
		}
	}
	const (
		packetRows = `SELECT string_agg(concat_ws('|', id, envelope_id, amount_cents, claimed_by, claimed_at, order_no, refunded_at), E'\n' ORDER BY id) FROM packets`
		eventRows  = `SELECT string_agg(id || ' ' || data::text, E'\n' ORDER BY id) FROM event_messages`
	)
	packetsBefore, eventsBefore := queryStrings(t, c, packetRows), queryStrings(t, c, eventRows)
	if err := m.Up(); err != nil {
		t.Fatalf("up: %v", err)
	}
	if got := queryStrings(t, c, packetRows); strings.Join(got, "") != strings.Join(packetsBefore, "") {
		t.Errorf("packets after the upgrade:\n%s\nbefore:\n%s", got, packetsBefore)
	}
	if got := queryStrings(t, c, eventRows); strings.Join(got, "") != strings.Join(eventsBefore, "") {
		t.Errorf("event_messages after the upgrade:\n%s\nbefore:\n%s", got, eventsBefore)
	}

	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	inFlight := []pgstore.Claim{
		{EnvelopeID: 1, PacketID: 101, UserID: "b", AmountCents: 20, ClaimedAt: at.Add(time.Second), OrderNo: "203005170000000002"},
		{EnvelopeID: 1, PacketID: 102, UserID: "c", AmountCents: 30, ClaimedAt: at.Add(2 * time.Second), OrderNo: "203005170000000004"},
	}
	res, err := pgstore.New(pool).ApplyClaims(ctx, inFlight)
	if err != nil || res.Applied != 1 || len(res.Conflicts) != 0 || len(res.SoldOut) != 1 {
		t.Fatalf("the batch in flight: %+v, %v; want 1 applied, envelope 1 sold out", res, err)
	}
	var claimed int64
	var status string
	if err := c.QueryRow(ctx, `SELECT claimed_cents, status FROM envelopes WHERE id = 1`).Scan(&claimed, &status); err != nil ||
		claimed != 60 || status != "sold_out" {
		t.Errorf("envelope 1: %d cents, %s, %v; want 60, sold_out", claimed, status, err)
	}

	if err := m.Steps(15 - migrations.Version); err != nil {
		t.Fatalf("down to 15 again: %v", err)
	}
	var holder string
	if err := c.QueryRow(ctx, `SELECT claimed_by FROM packets WHERE id = 102`).Scan(&holder); err != nil || holder != "c" {
		t.Errorf("after going down, packet 102 held by %q, %v; want c", holder, err)
	}
	var kind string
	if err := c.QueryRow(ctx, `SELECT c.relkind::text FROM pg_class c WHERE c.oid = 'packets'::regclass`).Scan(&kind); err != nil || kind != "r" {
		t.Errorf("after going down, packets is of kind %q, %v; want a table", kind, err)
	}
}
