package pgstore

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/db/dbsqlc"
)

// WriteTestEvents writes n envelope.suspended events of an envelope in tx
// through the writers' own id-taking tail (take_event_ids, as every query
// that writes events ends), and returns their ids. It lets a test hold a
// transaction open between writing events and committing, as a slow writer
// would.
func WriteTestEvents(ctx context.Context, tx pgx.Tx, envelopeID int64, n int) ([]int64, error) {
	rows, err := tx.Query(ctx, `WITH new_events AS (
		    SELECT 1 AS kind, now() AS at, g::bigint AS ref, 'envelope.suspended'::event_type AS type,
		           $1::bigint AS envelope_id, NULL::bigint AS packet_id,
		           jsonb_build_object('envelope_id', $1::bigint, 'reason', 'test') AS data
		    FROM generate_series(1, $2::int) g
		)
		, event_base AS (SELECT take_event_ids(count(*)) AS base FROM new_events)
		, event_rows AS (
		    INSERT INTO events (id, type, envelope_id, packet_id, data)
		    SELECT b.base + row_number() OVER (ORDER BY n.kind, n.at, n.ref), n.type, n.envelope_id, n.packet_id, n.data
		    FROM new_events n CROSS JOIN event_base b
		    RETURNING id
		)
		SELECT id FROM event_rows ORDER BY id`, envelopeID, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// ApplyClaimsWithoutEvents appends a batch as ApplyClaims does, with the
// statement after the COPY cut before its events: a same-run reference for
// what writing the events costs. It returns how many claims it applied.
func (s *Store) ApplyClaimsWithoutEvents(ctx context.Context, claims []Claim) (int, error) {
	stmt := dbsqlc.AddClaims[:strings.Index(dbsqlc.AddClaims, "), new_events AS (")] +
		")\nSELECT id, n, no_order, sold_out FROM changed"
	var res ApplyResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := dbsqlc.New(tx).CopyClaims(ctx, copyRows(claims)); err != nil {
			return err
		}
		if err := dbsqlc.New(tx).ClaimPlan(ctx); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, stmt, args(addParams(claims))...)
		if err != nil {
			return err
		}
		applied, err := pgx.CollectRows(rows, pgx.RowToStructByName[dbsqlc.AddClaimsRow])
		collectApplied(applied, &res)
		return err
	})
	return res.Applied, err
}

// WithAmounts returns claims with each one's AmountCents set to its
// packet's amount, as the grab would have told it (left 0 for a packet that
// does not exist).
func (s *Store) WithAmounts(t testing.TB, claims []Claim) []Claim {
	t.Helper()
	out := slices.Clone(claims)
	ids := make([]int64, len(out))
	for i, c := range out {
		ids[i] = c.PacketID
	}
	rows, err := s.pool.Query(t.Context(), `SELECT id, amount_cents FROM packet_pool WHERE id = ANY($1)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	amounts := map[int64]int64{}
	for rows.Next() {
		var id, a int64
		if err := rows.Scan(&id, &a); err != nil {
			t.Fatal(err)
		}
		amounts[id] = a
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	for i := range out {
		out[i].AmountCents = amounts[out[i].PacketID]
	}
	return out
}
