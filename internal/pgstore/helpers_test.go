package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/pgstore"
	"redpacket/internal/testenv"
)

// t0 is the tests' reference time, at the microsecond precision PostgreSQL keeps.
var t0 = time.Date(2030, 5, 17, 12, 0, 0, 0, time.UTC)

func newStore(t testing.TB) (*pgstore.Store, *pgxpool.Pool) {
	t.Helper()
	pool, _ := testenv.Postgres(t)
	return pgstore.New(pool), pool
}

// fixture is an envelope inserted by a test.
type fixture struct {
	pgstore.Envelope
	FirstPacket int64
	Amounts     []int64
}

// packet is the id of the envelope's i-th packet.
func (f fixture) packet(i int) int64 { return f.FirstPacket + int64(i) }

// insert writes an envelope (status loading) of the given packet amounts.
func insert(t testing.TB, s *pgstore.Store, id, firstPacket int64, amounts []int64, createdAt time.Time) fixture {
	t.Helper()
	var total int64
	for _, a := range amounts {
		total += a
	}
	e := pgstore.Envelope{
		ID: id, Shard: int(id % 16), SenderID: "sender-1", TotalCents: total, Count: len(amounts),
		CreatedAt: createdAt, ExpiresAt: createdAt.Add(24 * time.Hour),
	}
	if err := s.InsertEnvelope(t.Context(), e, firstPacket, amounts); err != nil {
		t.Fatalf("InsertEnvelope(%d): %v", id, err)
	}
	return fixture{Envelope: e, FirstPacket: firstPacket, Amounts: amounts}
}

// open inserts an envelope and marks it loaded.
func open(t testing.TB, s *pgstore.Store, id, firstPacket int64, amounts []int64) fixture {
	t.Helper()
	f := insert(t, s, id, firstPacket, amounts, t0)
	status, err := s.MarkLoaded(t.Context(), id)
	if err != nil || status != "open" {
		t.Fatalf("MarkLoaded(%d) = %q, %v", id, status, err)
	}
	return f
}

// claim is a claim whose amount the grab did not tell (apply fills it in
// from the packet, as Redis would have).
func claim(env, packet int64, user string) pgstore.Claim {
	return pgstore.Claim{EnvelopeID: env, PacketID: packet, UserID: user, ClaimedAt: t0.Add(time.Duration(packet) * time.Millisecond)}
}

// benchAmount is the amount amountsOf gave packet p of the benchmarks'
// envelope env, whose first packet is env*10,000,000.
func benchAmount(env, p int64) int64 { return 1 + (p-env*10_000_000)%97 }

// benchClaim is claim with its amount, for the benchmarks' envelopes.
func benchClaim(env, p int64, user string) pgstore.Claim {
	c := claim(env, p, user)
	c.AmountCents = benchAmount(env, p)
	return c
}

func readEnvelope(t testing.TB, s *pgstore.Store, id int64) pgstore.Envelope {
	t.Helper()
	e, err := s.Envelope(t.Context(), id)
	if err != nil {
		t.Fatalf("Envelope(%d): %v", id, err)
	}
	return e
}

// holder is who claimed a packet ("" for nobody) and when.
func holder(t testing.TB, pool *pgxpool.Pool, packet int64) (string, *time.Time) {
	t.Helper()
	var by *string
	var at *time.Time
	if err := pool.QueryRow(t.Context(), `SELECT claimed_by, claimed_at FROM packets WHERE id = $1`, packet).Scan(&by, &at); err != nil {
		t.Fatalf("packet %d: %v", packet, err)
	}
	if by == nil {
		return "", at
	}
	return *by, at
}

func count(t testing.TB, pool *pgxpool.Pool, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(t.Context(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// hasSQLState reports a PostgreSQL error of the code.
func hasSQLState(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}
