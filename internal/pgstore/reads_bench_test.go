package pgstore_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/pgstore"
)

// BenchmarkHistoryPages reads pages of 100 of the keyset-paged lists over a
// table of BENCH_READS_PACKETS packets (default 1,000,000; the figures in
// BENCHMARKS.md are with 10,000,000), every one claimed: the first page and
// the deepest one (the oldest claims of a user, the oldest envelopes of a
// sender, the last claims of the largest envelope). A deep page costs what
// the first does when both are reads of one index range.
func BenchmarkHistoryPages(b *testing.B) {
	n := benchReadsPackets(b)
	s, pool := newStore(b)
	// Writing the table takes minutes: bounded on its own, not by the test.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	writeHistoryTables(ctx, b, pool, n)

	oldestClaim, oldestEnvelope := deepestKeys(ctx, pool, "user-7", "sender-7")
	far := t0.AddDate(100, 0, 0)
	b.Run("user/first", func(b *testing.B) {
		benchPage(b, func() (int, error) { return pageRows(s.UserClaims(ctx, "user-7", 1<<62, historyLimit)) })
	})
	b.Run("user/deepest", func(b *testing.B) {
		benchPage(b, func() (int, error) {
			return pageRows(s.UserClaims(ctx, "user-7", oldestClaim.id, historyLimit))
		})
	})
	b.Run("sender/first", func(b *testing.B) {
		benchPage(b, func() (int, error) { return pageRows(s.SenderEnvelopes(ctx, "sender-7", far, 1<<62, historyLimit)) })
	})
	b.Run("sender/deepest", func(b *testing.B) {
		benchPage(b, func() (int, error) {
			return pageRows(s.SenderEnvelopes(ctx, "sender-7", oldestEnvelope.at, oldestEnvelope.id, historyLimit))
		})
	})
	b.Run("envelope/first", func(b *testing.B) {
		benchPage(b, func() (int, error) { return pageRows(s.EnvelopeClaims(ctx, 1, 1<<62, historyLimit)) })
	})
	b.Run("envelope/deepest", func(b *testing.B) {
		benchPage(b, func() (int, error) { return pageRows(s.EnvelopeClaims(ctx, 1, 10+historyLimit, historyLimit)) })
	})
	// The reference: the same deepest pages read with OFFSET, which walks
	// every newer row first.
	b.Run("user/deepest-by-offset", func(b *testing.B) {
		benchOffsetPage(ctx, b, pool, `SELECT c.packet_id, e.sender_id FROM claims c JOIN envelopes e ON e.id = c.envelope_id
			WHERE c.user_id = $1 ORDER BY c.envelope_id DESC LIMIT $2 OFFSET $3`, "user-7")
	})
	b.Run("sender/deepest-by-offset", func(b *testing.B) {
		benchOffsetPage(ctx, b, pool, `SELECT * FROM envelopes WHERE sender_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`, "sender-7")
	})
	b.Run("envelope/best", func(b *testing.B) {
		for b.Loop() {
			if c, err := s.BestClaim(ctx, 1); err != nil || c == nil {
				b.Fatal(c, err)
			}
		}
	})
	_ = pgstore.ErrNotFound
}

// historyLimit is the page size of BenchmarkHistoryPages.
const historyLimit = 100

// benchReadsPackets is BENCH_READS_PACKETS, or 1,000,000 when unset.
func benchReadsPackets(b *testing.B) int64 {
	n := int64(1_000_000)
	if v := os.Getenv("BENCH_READS_PACKETS"); v != "" {
		var err error
		if n, err = strconv.ParseInt(v, 10, 64); err != nil || n < 1_000_000 {
			b.Fatalf("BENCH_READS_PACKETS=%q: want a number of at least 1000000", v)
		}
	}
	return n
}

// writeHistoryTables fills the tables with n claimed packets.
// Envelopes of 10 packets (1000..), but the first one holds 100,000; the
// packet ids are those of envelope id*10+k; 1,000 users and 100
// senders, claims 1 ms apart.
func writeHistoryTables(ctx context.Context, b *testing.B, pool *pgxpool.Pool, n int64) {
	start := time.Now()
	envelopes := n / 10
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO envelopes (id, shard, share_code, sender_id, total_cents, count, status, created_at, expires_at, claimed_cents)
		 SELECT e, e % 16, NULL, 'sender-' || (e % 100), CASE WHEN e = 1 THEN 100000 ELSE 10 END * 7,
		        CASE WHEN e = 1 THEN 100000 ELSE 10 END, 'sold_out',
		        $1::timestamptz + e * interval '10 millisecond', $1::timestamptz + e * interval '10 millisecond' + interval '1 day',
		        CASE WHEN e = 1 THEN 100000 ELSE 10 END * 7
		 FROM generate_series(1, $2::bigint) e`, []any{t0, envelopes}},
		{`INSERT INTO packet_pool (id, envelope_id, amount_cents)
		 SELECT p, CASE WHEN p < 100010 THEN 1 ELSE p / 10 END, 1 + p % 97
		 FROM generate_series(10, $1::bigint * 10 - 1) p`, []any{envelopes}},
		{`INSERT INTO claims (envelope_id, packet_id, amount_cents, user_id, claimed_at, sender_id)
		 SELECT e, p, 1 + p % 97,
		        CASE WHEN p < 100010 THEN 'big-' || p ELSE 'user-' || (p % 1000) END,
		        $1::timestamptz + p * interval '1 millisecond', 'sender-' || (e % 100)
		 FROM generate_series(10, $2::bigint * 10 - 1) p, LATERAL (SELECT CASE WHEN p < 100010 THEN 1 ELSE p / 10 END AS e) x`,
			[]any{t0, envelopes}},
		// The large envelope's luckiest grab, as the flusher keeps it.
		{`UPDATE envelopes e SET best_packet_id = b.id, best_amount_cents = b.amount_cents
		 FROM (SELECT id, amount_cents FROM packet_pool WHERE envelope_id = 1 ORDER BY amount_cents DESC, id DESC LIMIT 1) b
		 WHERE e.id = 1`, nil},
		{`ANALYZE envelopes`, nil}, {`ANALYZE packet_pool`, nil}, {`ANALYZE claims`, nil},
	} {
		if _, err := pool.Exec(ctx, q.sql, q.args...); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d packets in %d envelopes written in %s", n, envelopes, time.Since(start).Round(time.Second))
}

// historyKey is a keyset cursor: a time and an id (a user's history needs
// only the id: its envelope).
type historyKey struct {
	at time.Time
	id int64
}

// deepestKeys are the cursors of the deepest pages: of user's claims and
// of sender's envelopes.
func deepestKeys(ctx context.Context, pool *pgxpool.Pool, user, sender string) (oldestClaim, oldestEnvelope historyKey) {
	_ = pool.QueryRow(ctx, `SELECT envelope_id FROM claims WHERE user_id = $2 ORDER BY envelope_id OFFSET $1 LIMIT 1`, historyLimit, user).
		Scan(&oldestClaim.id)
	_ = pool.QueryRow(ctx, `SELECT created_at, id FROM envelopes WHERE sender_id = $2 ORDER BY created_at, id OFFSET $1 LIMIT 1`, historyLimit, sender).
		Scan(&oldestEnvelope.at, &oldestEnvelope.id)
	return oldestClaim, oldestEnvelope
}

// pageRows is the number of rows of a page read, and its error.
func pageRows[T any](rows []T, err error) (int, error) { return len(rows), err }

// benchPage times read, which must return a full page each time.
func benchPage(b *testing.B, read func() (int, error)) {
	for b.Loop() {
		got, err := read()
		if err != nil || got != historyLimit {
			b.Fatalf("page of %d rows, %v; want %d", got, err, historyLimit)
		}
	}
}

// benchOffsetPage times the deepest page of sql read with OFFSET.
func benchOffsetPage(ctx context.Context, b *testing.B, pool *pgxpool.Pool, sql, key string) {
	var total int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM ("+sql+") t", key, 1<<30, 0).Scan(&total); err != nil {
		b.Fatal(err)
	}
	benchPage(b, func() (int, error) {
		rows, err := pool.Query(ctx, sql, key, historyLimit, total-historyLimit-1)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			n++
		}
		return n, rows.Err()
	})
}
