package pgstore

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// WriteTestEvents writes n envelope.suspended events of an envelope in tx
// through the writers' own position-taking tail, and returns their ids. It
// lets a test hold a transaction open between writing events and committing,
// as a slow writer would.
func WriteTestEvents(ctx context.Context, tx pgx.Tx, envelopeID int64, n int) ([]int64, error) {
	rows, err := tx.Query(ctx, `WITH new_events AS (
		    SELECT 1 AS kind, now() AS at, g::bigint AS ref, '`+EventEnvelopeSuspended+`' AS type,
		           $1::bigint AS envelope_id, NULL::bigint AS packet_id,
		           jsonb_build_object('envelope_id', $1::bigint, 'reason', 'test') AS data
		    FROM generate_series(1, $2::int) g
		)`+eventsTail+`
		SELECT id FROM event_rows ORDER BY id`, envelopeID, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// ApplyClaimsWithoutEvents applies a batch with the claims statement cut
// before its events, as it was before the outbox: a same-run reference for
// what writing the events costs. It returns how many claims it applied.
func (s *Store) ApplyClaimsWithoutEvents(ctx context.Context, claims []Claim) (int, error) {
	stmt := applyClaims[:strings.Index(applyClaims, "), new_events AS (")] + ")\nSELECT id, n, no_order, sold_out FROM changed"
	var res ApplyResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, stmt, columns(claims)...)
		if err != nil {
			return err
		}
		_, _, err = collectApplied(rows, &res)
		return err
	})
	return res.Applied, err
}

// The claim statements, for tests.
var (
	ApplyClaimsTrusting = applyClaimsTrusting
	ApplyClaimsGuarded  = applyClaims
)
