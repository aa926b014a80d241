package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrWrongStatus means the envelope is not in a status the change applies
// to (for instance settled already); nothing was changed.
var ErrWrongStatus = errors.New("envelope is not in a status this change applies to")

// ErrLedger means an envelope's recorded cents disagree with its packets; the
// change was rolled back and the envelope needs an operator.
var ErrLedger = errors.New("envelope cents disagree with its packets")

// Settlement is what settling an envelope wrote.
type Settlement struct {
	Status        string // settled, or failed for an envelope that never opened
	ClaimedCents  int64
	RefundedCents int64
	Refunded      int // packets refunded now
}

// Unsettled lists a shard's envelopes whose state may live only in Redis:
// loading, open or expired (sold-out ones are wholly in PostgreSQL).
func (s *Store) Unsettled(ctx context.Context, shard int) ([]Envelope, error) {
	return s.envelopes(ctx, `SELECT `+envelopeColumns+` FROM envelopes
		WHERE status IN ('loading', 'open', 'expired') AND shard = $1 ORDER BY id`, shard)
}

func (s *Store) envelopes(ctx context.Context, sql string, args ...any) ([]Envelope, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list envelopes: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Envelope, error) { return scanEnvelope(r) })
}

// MarkExpired records that an open envelope was closed and waits for its
// last claims before it is settled.
func (s *Store) MarkExpired(ctx context.Context, id int64) error {
	_, err := s.pool.Exec(ctx, `UPDATE envelopes SET status = 'expired' WHERE id = $1 AND status = 'open'`, id)
	if err != nil {
		return fmt.Errorf("mark envelope %d expired: %w", id, err)
	}
	return nil
}

// Settle refunds an envelope's unclaimed packets and records the refund, in
// one transaction, if its status is one of from. The envelope's cents are
// checked against its packets first; on a mismatch nothing is written and
// ErrLedger is returned.
func (s *Store) Settle(ctx context.Context, id int64, now time.Time, from ...string) (Settlement, error) {
	return s.finish(ctx, id, now, "settled", from)
}

// FailLoading settles an envelope that never finished loading as failed:
// every packet goes back to the sender. Only for envelopes still loading
// that Redis shows were never offered.
func (s *Store) FailLoading(ctx context.Context, id int64, now time.Time) (Settlement, error) {
	return s.finish(ctx, id, now, "failed", []string{"loading"})
}

// settleEnvelope records a settlement ($2: settled or failed) and its
// envelope.settled event.
var settleEnvelope = `
WITH changed AS (
    UPDATE envelopes SET status = $2, refunded_cents = $3, settled_at = $4 WHERE id = $1
    RETURNING id, sender_id, status, total_cents, claimed_cents, refunded_cents, settled_at
), new_events AS (
    SELECT 1 AS kind, now() AS at, id AS ref, '` + EventEnvelopeSettled + `' AS type, id AS envelope_id,
           NULL::bigint AS packet_id, jsonb_build_object('envelope_id', id, 'sender_id', sender_id, 'status', status,
               'total_cents', total_cents, 'claimed_cents', claimed_cents, 'refunded_cents', refunded_cents,
               'settled_at', ` + jsonTime("settled_at") + `) AS data
    FROM changed
)` + eventsTail + `
SELECT count(*) FROM changed`

func (s *Store) finish(ctx context.Context, id int64, now time.Time, to string, from []string) (Settlement, error) {
	var out Settlement
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var status string
		var total, claimed int64
		err := tx.QueryRow(ctx, `SELECT status, total_cents, claimed_cents FROM envelopes
			WHERE id = $1 FOR UPDATE`, id).Scan(&status, &total, &claimed)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if !contains(from, status) {
			return fmt.Errorf("%w: it is %s", ErrWrongStatus, status)
		}
		tag, err := tx.Exec(ctx, `UPDATE packets SET refunded_at = $2
			WHERE envelope_id = $1 AND claimed_by IS NULL AND refunded_at IS NULL`, id, now)
		if err != nil {
			return err
		}
		var claimedSum, refundedSum int64
		err = tx.QueryRow(ctx, `SELECT
			coalesce(sum(amount_cents) FILTER (WHERE claimed_by IS NOT NULL), 0)::bigint,
			coalesce(sum(amount_cents) FILTER (WHERE refunded_at IS NOT NULL), 0)::bigint
			FROM packets WHERE envelope_id = $1`, id).Scan(&claimedSum, &refundedSum)
		if err != nil {
			return err
		}
		if claimedSum != claimed || claimedSum+refundedSum != total {
			return fmt.Errorf("%w: claimed_cents %d, claimed packets %d, refunded packets %d, total %d",
				ErrLedger, claimed, claimedSum, refundedSum, total)
		}
		// Last, with its event: the backend refunds the sender from it.
		_, err = tx.Exec(ctx, settleEnvelope, id, to, refundedSum, now)
		out = Settlement{Status: to, ClaimedCents: claimedSum, RefundedCents: refundedSum, Refunded: int(tag.RowsAffected())}
		return err
	})
	if err != nil {
		return Settlement{}, fmt.Errorf("settle envelope %d as %s: %w", id, to, err)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// suspend marks an envelope suspended and writes its envelope.suspended
// event, only if it was loading, open or expired.
var suspend = `
WITH changed AS (
    UPDATE envelopes SET status = 'suspended', suspended_at = $3, suspend_reason = $2
    WHERE id = $1 AND status IN ('loading', 'open', 'expired')
    RETURNING id, suspend_reason, suspended_at
), new_events AS (
    SELECT 1 AS kind, now() AS at, id AS ref, '` + EventEnvelopeSuspended + `' AS type, id AS envelope_id,
           NULL::bigint AS packet_id, jsonb_build_object('envelope_id', id, 'reason', suspend_reason,
               'suspended_at', ` + jsonTime("suspended_at") + `) AS data
    FROM changed
)` + eventsTail + `
SELECT count(*) FROM changed`

// Suspend marks an envelope suspended with the reason, if it is loading,
// open or expired; changed is false when it was not (and then no event is
// written).
func (s *Store) Suspend(ctx context.Context, id int64, reason string, now time.Time) (changed bool, err error) {
	var n int
	if err := s.pool.QueryRow(ctx, suspend, id, reason, now).Scan(&n); err != nil {
		return false, fmt.Errorf("suspend envelope %d: %w", id, err)
	}
	return n == 1, nil
}

// reopen moves a suspended envelope back to open or sold out and writes
// envelope.recovered, and envelope.sold_out when that is its new status (its
// last packet was claimed while it was suspended, when no sold_out event
// could be written).
var reopen = `
WITH changed AS (
    UPDATE envelopes
    SET status = CASE WHEN claimed_cents = total_cents THEN 'sold_out' ELSE 'open' END,
        suspended_at = NULL, suspend_reason = NULL
    WHERE id = $1 AND status = 'suspended'
    RETURNING id, status, count, total_cents
), new_events AS (
    SELECT 1 AS kind, now() AS at, id AS ref, '` + EventEnvelopeRecovered + `' AS type, id AS envelope_id,
           NULL::bigint AS packet_id, jsonb_build_object('envelope_id', id, 'action', 'reload', 'status', status) AS data
    FROM changed
    UNION ALL
    SELECT 2, now(), id, '` + EventEnvelopeSoldOut + `', id, NULL,
           jsonb_build_object('envelope_id', id, 'count', count, 'total_cents', total_cents)
    FROM changed WHERE status = 'sold_out'
)` + eventsTail + `
SELECT status FROM changed`

// Reopen moves a suspended envelope back to open (or sold out when nothing is
// left), after an operator reloaded it into Redis.
func (s *Store) Reopen(ctx context.Context, id int64) (string, error) {
	var status string
	err := s.pool.QueryRow(ctx, reopen, id).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("reopen envelope %d: %w", id, ErrWrongStatus)
	}
	if err != nil {
		return "", fmt.Errorf("reopen envelope %d: %w", id, err)
	}
	return status, nil
}

// HeldClaim is a packet PostgreSQL shows as claimed.
type HeldClaim struct {
	UserID      string
	PacketID    int64
	AmountCents int64
	ClaimedAt   time.Time
	OrderNo     string // "" when none was recorded
}

// HeldClaims lists an envelope's claimed packets.
func (s *Store) HeldClaims(ctx context.Context, id int64) ([]HeldClaim, error) {
	rows, err := s.pool.Query(ctx, `SELECT claimed_by, id, amount_cents, claimed_at, coalesce(order_no, '')
		FROM packets WHERE envelope_id = $1 AND claimed_by IS NOT NULL ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("claims of envelope %d: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[HeldClaim])
	if err != nil {
		return nil, fmt.Errorf("claims of envelope %d: %w", id, err)
	}
	return out, nil
}

// UserClaim returns the packet a user holds in an envelope (ErrNotFound when
// none).
func (s *Store) UserClaim(ctx context.Context, id int64, userID string) (HeldClaim, error) {
	var c HeldClaim
	err := s.pool.QueryRow(ctx, `SELECT claimed_by, id, amount_cents, claimed_at, coalesce(order_no, '')
		FROM packets WHERE envelope_id = $1 AND claimed_by = $2`, id, userID).
		Scan(&c.UserID, &c.PacketID, &c.AmountCents, &c.ClaimedAt, &c.OrderNo)
	if errors.Is(err, pgx.ErrNoRows) {
		return HeldClaim{}, ErrNotFound
	}
	if err != nil {
		return HeldClaim{}, fmt.Errorf("claim of user in envelope %d: %w", id, err)
	}
	return c, nil
}

// EnvelopeCents is an envelope's claimed cents and status, for comparing with
// Redis after a batch.
type EnvelopeCents struct {
	ClaimedCents int64
	Status       string
}

// ClaimedCents reads the claimed cents and status of several envelopes.
func (s *Store) ClaimedCents(ctx context.Context, ids []int64) (map[int64]EnvelopeCents, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, claimed_cents, status FROM envelopes WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("claimed cents: %w", err)
	}
	defer rows.Close()
	out := make(map[int64]EnvelopeCents, len(ids))
	for rows.Next() {
		var id int64
		var c EnvelopeCents
		if err := rows.Scan(&id, &c.ClaimedCents, &c.Status); err != nil {
			return nil, fmt.Errorf("claimed cents: %w", err)
		}
		out[id] = c
	}
	return out, rows.Err()
}

// Epochs returns the token recorded for each shard ("" for none yet).
func (s *Store) Epochs(ctx context.Context, shards int) ([]string, error) {
	out := make([]string, shards)
	rows, err := s.pool.Query(ctx, `SELECT shard, epoch FROM redis_epochs`)
	if err != nil {
		return nil, fmt.Errorf("read shard epochs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var shard int
		var epoch string
		if err := rows.Scan(&shard, &epoch); err != nil {
			return nil, fmt.Errorf("read shard epochs: %w", err)
		}
		if shard < shards {
			out[shard] = epoch
		}
	}
	return out, rows.Err()
}

// SetEpoch records a shard's token.
//
// It replaces only the token the caller read (was; "" for none yet), so two
// flushers that both found a shard's data lost agree on one new token: the
// second is told ErrWrongStatus and leaves the shard to the next round.
func (s *Store) SetEpoch(ctx context.Context, shard int, was, epoch string) error {
	tag, err := s.pool.Exec(ctx, `INSERT INTO redis_epochs (shard, epoch) VALUES ($1, $3)
		ON CONFLICT (shard) DO UPDATE SET epoch = excluded.epoch, updated_at = now()
		WHERE redis_epochs.epoch = $2`, shard, was, epoch)
	if err != nil {
		return fmt.Errorf("record epoch of shard %d: %w", shard, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("record epoch of shard %d: %w: changed by another flusher", shard, ErrWrongStatus)
	}
	return nil
}

// MaxOrderSeq returns the highest sequence part of a day's order numbers
// (date as yyyyMMdd followed by width digits) that PostgreSQL holds, 0 when
// none: one step down the order_no index.
func (s *Store) MaxOrderSeq(ctx context.Context, date string, width int) (int64, error) {
	var top *string
	err := s.pool.QueryRow(ctx, `SELECT max(order_no) FROM packets WHERE order_no BETWEEN $1 AND $2`,
		date+strings.Repeat("0", width), date+strings.Repeat("9", width)).Scan(&top)
	if err != nil {
		return 0, fmt.Errorf("highest order number of %s: %w", date, err)
	}
	if top == nil {
		return 0, nil
	}
	seq, err := strconv.ParseInt((*top)[len(date):], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("highest order number of %s: %q: %w", date, *top, err)
	}
	return seq, nil
}
