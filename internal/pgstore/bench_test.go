package pgstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/pgstore"
)

// BenchmarkApplyClaims measures one batch of 2000 new claims per operation,
// inserting a fresh envelope whenever the current one runs out of packets.
// "unnest" is the shipped ApplyClaims; "copy" is the alternative of COPY into
// a temporary table and UPDATE ... FROM it, measured here to choose.
func BenchmarkApplyClaims(b *testing.B) {
	b.Run("unnest", func(b *testing.B) {
		s, _ := newStore(b)
		benchApply(b, s, func(ctx context.Context, batch []pgstore.Claim) (int, error) {
			res, err := s.ApplyClaims(ctx, batch)
			if len(res.Conflicts) != 0 {
				return 0, fmt.Errorf("%d conflicts", len(res.Conflicts))
			}
			return res.Applied, err
		})
	})
	b.Run("copy", func(b *testing.B) {
		s, pool := newStore(b)
		benchApply(b, s, func(ctx context.Context, batch []pgstore.Claim) (int, error) {
			return applyByCopy(ctx, pool, batch)
		})
	})
}

func benchApply(b *testing.B, s *pgstore.Store, write func(context.Context, []pgstore.Claim) (int, error)) {
	ctx := b.Context()
	const (
		batchSize   = 2000
		perEnvelope = 50 * batchSize
	)
	amounts := amountsOf(perEnvelope)
	var (
		env  int64
		next = perEnvelope // packets of env used so far
	)
	batch := make([]pgstore.Claim, batchSize)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if next == perEnvelope {
			b.StopTimer()
			env++
			insert(b, s, env, env*10_000_000, amounts, t0)
			if _, err := s.MarkLoaded(ctx, env); err != nil {
				b.Fatal(err)
			}
			next = 0
			b.StartTimer()
		}
		for i := range batch {
			p := env*10_000_000 + int64(next+i)
			batch[i] = claim(env, p, "u"+strconv.FormatInt(p, 10))
		}
		next += batchSize
		applied, err := write(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		if applied != batchSize {
			b.Fatalf("applied %d; want %d", applied, batchSize)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchSize), "ns/claim")
}

// applyByCopy is the COPY alternative to ApplyClaims' unnest, doing the same
// claim and claimed_cents work (without conflict recording).
func applyByCopy(ctx context.Context, pool *pgxpool.Pool, batch []pgstore.Claim) (int, error) {
	var applied int
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS claim_input
			(envelope_id bigint, packet_id bigint, user_id text, claimed_at timestamptz) ON COMMIT DELETE ROWS`); err != nil {
			return err
		}
		rows := make([][]any, len(batch))
		for i, c := range batch {
			rows[i] = []any{c.EnvelopeID, c.PacketID, c.UserID, c.ClaimedAt}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"claim_input"},
			[]string{"envelope_id", "packet_id", "user_id", "claimed_at"}, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `WITH applied AS (
			UPDATE packets p SET claimed_by = i.user_id, claimed_at = i.claimed_at
			FROM claim_input i
			WHERE p.id = i.packet_id AND p.envelope_id = i.envelope_id
			  AND p.claimed_by IS NULL AND p.refunded_at IS NULL
			  AND NOT EXISTS (SELECT 1 FROM packets q WHERE q.envelope_id = i.envelope_id AND q.claimed_by = i.user_id)
			RETURNING p.envelope_id, p.amount_cents
		), totals AS (
			SELECT envelope_id, sum(amount_cents)::bigint AS cents, count(*) AS n FROM applied GROUP BY envelope_id
		), upd AS (
			UPDATE envelopes e SET claimed_cents = e.claimed_cents + t.cents FROM totals t WHERE e.id = t.envelope_id
		)
		SELECT coalesce(sum(n), 0) FROM totals`).Scan(&applied)
	})
	return applied, err
}
