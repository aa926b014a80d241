// Package pgstore is the PostgreSQL side: the connection pool, the schema
// check, and every query the daemons run. All SQL is parameterised.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound means no envelope has the id asked for.
var ErrNotFound = errors.New("envelope not found")

// ErrShareCodeTaken means another envelope already has the share code: the
// caller retries with a new one.
var ErrShareCodeTaken = errors.New("share code already in use")

// Store runs the service's queries on a pool.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Connect opens a pool and checks that the server answers.
func Connect(ctx context.Context, databaseURL string) (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return nil, fmt.Errorf("open postgres pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping postgres: %w", err)
	}
	return pool, nil
}

// Envelope is a row of the envelopes table.
type Envelope struct {
	ID            int64
	Shard         int
	ShareCode     *string
	SenderID      string
	TotalCents    int64
	Count         int
	Status        string
	CreatedAt     time.Time
	ExpiresAt     time.Time
	SettledAt     *time.Time
	ClaimedCents  int64
	RefundedCents int64
	SuspendedAt   *time.Time
	SuspendReason *string
}

const envelopeColumns = `id, shard, share_code, sender_id, total_cents, count, status,
	created_at, expires_at, settled_at, claimed_cents, refunded_cents, suspended_at, suspend_reason`

func scanEnvelope(row pgx.Row) (Envelope, error) {
	var e Envelope
	err := row.Scan(&e.ID, &e.Shard, &e.ShareCode, &e.SenderID, &e.TotalCents, &e.Count, &e.Status,
		&e.CreatedAt, &e.ExpiresAt, &e.SettledAt, &e.ClaimedCents, &e.RefundedCents, &e.SuspendedAt, &e.SuspendReason)
	return e, err
}

// InsertEnvelope writes a new envelope (status loading) and its packets in
// one transaction. Packet ids are firstPacketID, firstPacketID+1, ...; the
// packets go in with COPY.
func (s *Store) InsertEnvelope(ctx context.Context, e Envelope, firstPacketID int64, amounts []int64) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO envelopes
			(id, shard, share_code, sender_id, total_cents, count, status, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, 'loading', $7, $8)`,
			e.ID, e.Shard, e.ShareCode, e.SenderID, e.TotalCents, e.Count, e.CreatedAt, e.ExpiresAt)
		if hasConstraint(err, "envelopes_share_code_key") {
			return fmt.Errorf("insert envelope %d: %w", e.ID, ErrShareCodeTaken)
		}
		if err != nil {
			return fmt.Errorf("insert envelope %d: %w", e.ID, err)
		}
		rows := make([][]any, len(amounts))
		for i, a := range amounts {
			rows[i] = []any{firstPacketID + int64(i), e.ID, a}
		}
		_, err = tx.CopyFrom(ctx, pgx.Identifier{"packets"},
			[]string{"id", "envelope_id", "amount_cents"}, pgx.CopyFromRows(rows))
		if err != nil {
			return fmt.Errorf("copy packets of envelope %d: %w", e.ID, err)
		}
		return nil
	})
}

// markLoaded moves a loading envelope to open, or to sold_out (with its
// envelope.sold_out event) when every packet was grabbed and flushed before
// it ran; claims applied while it was loading could not make it sold out.
// The row is locked first so that was is the status this statement changed.
var markLoaded = `
WITH before AS (SELECT id, status FROM envelopes WHERE id = $1 FOR UPDATE),
changed AS (
    UPDATE envelopes e
    SET status = CASE WHEN e.status <> 'loading' THEN e.status
                      WHEN e.claimed_cents = e.total_cents THEN 'sold_out'
                      ELSE 'open' END
    FROM before b WHERE e.id = b.id
    RETURNING e.id, e.status, b.status AS was, e.count, e.total_cents
), new_events AS (
    SELECT 1 AS kind, now() AS at, id AS ref, '` + EventEnvelopeSoldOut + `' AS type, id AS envelope_id,
           NULL::bigint AS packet_id, jsonb_build_object('envelope_id', id, 'count', count, 'total_cents', total_cents) AS data
    FROM changed WHERE was = 'loading' AND status = 'sold_out'
)` + eventsTail + `
SELECT status FROM changed`

// MarkLoaded moves a loading envelope to open (or straight to sold_out when
// every packet was grabbed and flushed before this ran). It returns the status
// the envelope has afterwards.
func (s *Store) MarkLoaded(ctx context.Context, id int64) (string, error) {
	var status string
	err := s.pool.QueryRow(ctx, markLoaded, id).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("mark envelope %d loaded: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("mark envelope %d loaded: %w", id, err)
	}
	return status, nil
}

// Envelope reads one envelope.
func (s *Store) Envelope(ctx context.Context, id int64) (Envelope, error) {
	e, err := scanEnvelope(s.pool.QueryRow(ctx, `SELECT `+envelopeColumns+` FROM envelopes WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Envelope{}, fmt.Errorf("envelope %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Envelope{}, fmt.Errorf("read envelope %d: %w", id, err)
	}
	return e, nil
}

// EnvelopeByShareCode reads the envelope with a share code.
func (s *Store) EnvelopeByShareCode(ctx context.Context, code string) (Envelope, error) {
	e, err := scanEnvelope(s.pool.QueryRow(ctx, `SELECT `+envelopeColumns+` FROM envelopes WHERE share_code = $1`, code))
	if errors.Is(err, pgx.ErrNoRows) {
		return Envelope{}, fmt.Errorf("share code %s: %w", code, ErrNotFound)
	}
	if err != nil {
		return Envelope{}, fmt.Errorf("read envelope by share code %s: %w", code, err)
	}
	return e, nil
}

// UnclaimedPackets returns the ids and amounts of an envelope's packets that
// nobody has claimed and that were not refunded, in id order.
func (s *Store) UnclaimedPackets(ctx context.Context, envelopeID int64) (ids, amounts []int64, err error) {
	rows, err := s.pool.Query(ctx, `SELECT id, amount_cents FROM packets
		WHERE envelope_id = $1 AND claimed_by IS NULL AND refunded_at IS NULL ORDER BY id`, envelopeID)
	if err != nil {
		return nil, nil, fmt.Errorf("unclaimed packets of envelope %d: %w", envelopeID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, amount int64
		if err := rows.Scan(&id, &amount); err != nil {
			return nil, nil, err
		}
		ids, amounts = append(ids, id), append(amounts, amount)
	}
	return ids, amounts, rows.Err()
}

// ClaimedCount counts an envelope's claimed packets (index-only on the
// (envelope_id, claimed_by) key).
func (s *Store) ClaimedCount(ctx context.Context, envelopeID int64) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM packets
		WHERE envelope_id = $1 AND claimed_by IS NOT NULL`, envelopeID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count claims of envelope %d: %w", envelopeID, err)
	}
	return n, nil
}
