package migrations_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/pgstore"
	"redpacket/migrations"
)

// Going down past migration 17 turns the runs' claim events into events
// rows with their delivery state, so the feed, the webhooks and
// event_messages show the same events before and after; going up again
// leaves those rows as they are, and new batches write runs again. The
// claims are written by this build, so on the latest schema.
func TestClaimEventsSurviveGoingDown(t *testing.T) {
	t.Parallel()
	m, dbURL := downTo(t, migrations.Version)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := pgstore.New(pool)
	at := time.Date(2030, 5, 17, 8, 0, 0, 0, time.UTC)
	for env := int64(1); env <= 2; env++ {
		e := pgstore.Envelope{ID: env, Shard: 1, SenderID: "s", TotalCents: 40, Count: 4, CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
		if err := s.InsertEnvelope(ctx, e, env*100, []int64{10, 10, 10, 10}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkLoaded(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	claims := func(env int64, from, to int) []pgstore.Claim {
		var out []pgstore.Claim
		for i := from; i < to; i++ {
			p := env*100 + int64(i)
			out = append(out, pgstore.Claim{EnvelopeID: env, PacketID: p, UserID: "u" + string(rune('a'+i)),
				AmountCents: 10, ClaimedAt: at.Add(time.Duration(p) * time.Millisecond)})
		}
		return out
	}
	if _, err := s.ApplyClaims(ctx, append(claims(1, 0, 3), claims(2, 0, 2)...)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ApplyClaims(ctx, claims(2, 2, 4)); err != nil { // sells envelope 2 out
		t.Fatal(err)
	}
	// Envelope 1's run: its first event delivered, the second failed once.
	if _, err := pool.Exec(ctx, `UPDATE claim_event_runs SET delivered_through = 1, delivered_at = now(),
		attempts = 1, next_attempt_at = now() + interval '1 minute', last_error = 'down' WHERE envelope_id = 1`); err != nil {
		t.Fatal(err)
	}
	const messages = `SELECT string_agg(concat_ws(' ', id, type, envelope_id, data::text, delivered_at IS NOT NULL, attempts,
		next_attempt_at IS NOT NULL, last_error), E'\n' ORDER BY id) FROM event_messages`
	c := connect(t, dbURL)
	before := strings.Join(queryStrings(t, c, messages), "")
	if !strings.Contains(before, "\n2 packet.claimed 1") || strings.Count(before, "\n") != 7 {
		t.Fatalf("the ledger before: %s", before)
	}
	if err := m.Migrate(16); err != nil {
		t.Fatalf("down to 16: %v", err)
	}
	if got := strings.Join(queryStrings(t, c, messages), ""); got != before {
		t.Errorf("event_messages at 16:\n%s\nbefore:\n%s", got, before)
	}
	if err := m.Up(); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if got := strings.Join(queryStrings(t, c, messages), ""); got != before {
		t.Errorf("event_messages up again:\n%s\nbefore:\n%s", got, before)
	}
	if _, err := s.ApplyClaims(ctx, claims(1, 3, 4)); err != nil {
		t.Fatal(err)
	}
	evs, err := s.EventsAfter(ctx, 0, 100)
	if err != nil || len(evs) != 10 || evs[9].ID != 10 {
		t.Fatalf("feed after a new batch: %d events, %v; want 1..10 (envelope 1 sold out)", len(evs), err)
	}
}
