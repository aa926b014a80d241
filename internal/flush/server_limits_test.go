package flush

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap/zaptest"

	"redpacket/internal/pgstore"
	"redpacket/internal/testenv/stack"
)

// A DBA's statement_timeout shorter than a settlement takes does not keep
// the envelope from settling (it failed the same way at every round,
// unrefunded): the settlement lifts the limit for its transaction.
func TestSettlementOutlastsTheDatabasesStatementTimeout(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := t.Context()
	e, claims := expiring(t, s, 10, 4)
	if err := newFlusher(t, s, Config{}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{ // refunds that take longer than the limit
		`CREATE FUNCTION test_slow_refund() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(2); RETURN NULL; END $$`,
		`CREATE TRIGGER test_slow_refund AFTER UPDATE ON packet_pool FOR EACH STATEMENT EXECUTE FUNCTION test_slow_refund()`,
		`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET statement_timeout = %L', current_database(), '1s'); END $$`,
	} {
		if _, err := s.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	limited, err := pgxpool.New(ctx, s.DBURL) // sessions with the database's limit
	if err != nil {
		t.Fatal(err)
	}
	defer limited.Close()
	f := New(s.Redis, pgstore.New(limited), Config{}, zaptest.NewLogger(t))
	f.now = s.Clock.Now
	s.Clock.Advance(61 * time.Second)
	for range 2 { // closed, then settled
		if err := f.Upkeep(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	wantSettled(t, s, e.ID, claims)
}
