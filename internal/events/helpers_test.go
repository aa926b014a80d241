package events_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/pgstore"
	"redpacket/internal/testenv"
)

// t0 is the tests' reference time.
var t0 = time.Date(2030, 5, 17, 12, 0, 0, 0, time.UTC)

// db is a test's own database.
type db struct {
	*pgstore.Store
	pool *pgxpool.Pool
	url  string
}

func newDB(t testing.TB) db {
	t.Helper()
	pool, url := testenv.Postgres(t)
	return db{Store: pgstore.New(pool), pool: pool, url: url}
}

// openEnvelope writes an open envelope of n packets of 10 cents, ids
// env*1000, env*1000+1, ...
func (d db) openEnvelope(t testing.TB, env int64, n int) {
	t.Helper()
	amounts := make([]int64, n)
	for i := range amounts {
		amounts[i] = 10
	}
	e := pgstore.Envelope{ID: env, Shard: int(env % 16), SenderID: "sender", TotalCents: int64(10 * n), Count: n,
		CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := d.InsertEnvelope(t.Context(), e, env*1000, amounts); err != nil {
		t.Fatal(err)
	}
	if _, err := d.MarkLoaded(t.Context(), env); err != nil {
		t.Fatal(err)
	}
}

// claimPackets claims packets [from, to) of an envelope, one user each, in
// one batch, as the flusher writes it (its claim events one run).
func (d db) claimPackets(t testing.TB, env int64, from, to int) {
	t.Helper()
	d.apply(t, env, from, to, 10)
}

// claimPacketsAsRows claims packets [from, to) as claimPackets does, but
// without their amounts, which sends the batch the guarded way: its claim
// events are events rows.
func (d db) claimPacketsAsRows(t testing.TB, env int64, from, to int) {
	t.Helper()
	d.apply(t, env, from, to, 0)
}

func (d db) apply(t testing.TB, env int64, from, to int, amount int64) {
	t.Helper()
	var batch []pgstore.Claim
	for i := from; i < to; i++ {
		p := env*1000 + int64(i)
		batch = append(batch, pgstore.Claim{EnvelopeID: env, PacketID: p, UserID: fmt.Sprintf("u%d", p),
			AmountCents: amount, ClaimedAt: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	if _, err := d.ApplyClaims(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
}

func (d db) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := d.pool.QueryRow(t.Context(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// waitFor polls cond every 20 ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
