package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Webhook delivery state lives on the events rows themselves: delivered_at
// once the receiver accepted an event, and attempts, next_attempt_at and
// last_error while it does not. An envelope's events are delivered in order,
// so only its first undelivered event (its head) is ever tried, and the
// retry columns of that row are the envelope's backoff. A sender holds the
// head's row lock (FOR UPDATE) while it calls the receiver, so several
// processes can send at once without two of them sending one envelope's
// events: the next event of an envelope is only looked at once the one
// before it is recorded delivered, and ids of an envelope only grow (events
// become visible in id order).

// deliveryHeads walks the pending index one envelope at a time (a loose
// index scan: one probe per envelope, however many events each has waiting)
// from envelope $1 on, and keeps the heads that are due and not in $2. The
// walk is evaluated lazily, so it stops once $3 heads are found.
const deliveryHeads = `
WITH RECURSIVE heads AS (
    (SELECT envelope_id, id, next_attempt_at FROM events
     WHERE delivered_at IS NULL AND envelope_id > $1 ORDER BY envelope_id, id LIMIT 1)
    UNION ALL
    SELECT n.* FROM heads h CROSS JOIN LATERAL (
        SELECT envelope_id, id, next_attempt_at FROM events
        WHERE delivered_at IS NULL AND envelope_id > h.envelope_id ORDER BY envelope_id, id LIMIT 1) n
), due AS MATERIALIZED (
    SELECT id FROM heads
    WHERE (next_attempt_at IS NULL OR next_attempt_at <= clock_timestamp()) AND NOT envelope_id = ANY($2)
    LIMIT $3
)
SELECT m.id, m.type, m.envelope_id, m.data, m.created_at, m.attempts
FROM due JOIN event_messages m ON m.id = due.id
ORDER BY m.envelope_id`

// DeliveryHeads returns up to limit envelopes' first undelivered events
// whose retry is due, for envelopes above afterEnvelope in id order and not
// in skip.
func (s *Store) DeliveryHeads(ctx context.Context, afterEnvelope int64, skip []int64, limit int) ([]Event, error) {
	if skip == nil {
		skip = []int64{}
	}
	rows, err := s.pool.Query(ctx, deliveryHeads, afterEnvelope, skip, limit)
	if err != nil {
		return nil, fmt.Errorf("find events to deliver: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Event])
	if err != nil {
		return nil, fmt.Errorf("find events to deliver: %w", err)
	}
	return out, nil
}

// NextUndelivered returns the id of an envelope's first undelivered event,
// 0 when it has none.
func (s *Store) NextUndelivered(ctx context.Context, envelopeID int64) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT id FROM events WHERE envelope_id = $1 AND delivered_at IS NULL
		ORDER BY id LIMIT 1`, envelopeID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("next event of envelope %d: %w", envelopeID, err)
	}
	return id, nil
}

// Delivery is what Deliver did with an event.
type Delivery int

const (
	// DeliverySkipped: the event was delivered already, is not due, or
	// another sender holds it; nothing was sent.
	DeliverySkipped Delivery = iota
	// Delivered: the receiver accepted it, and that is recorded.
	Delivered
	// DeliveryFailed: the receiver refused it or did not answer; the
	// failed attempt and the time of the next one are recorded.
	DeliveryFailed
)

// recordTimeout bounds each statement of a delivery. They run detached from
// the caller's cancellation, so an outcome the receiver has seen is recorded
// even when the sender is stopping.
const recordTimeout = 10 * time.Second

// Deliver takes event id if it is undelivered, due and held by no other
// sender, calls send with it while holding its row lock, and records the
// outcome: delivered, or a failed attempt whose next try is retryIn(number
// of failed attempts so far, this one included) away. When ctx ends during
// send, nothing is recorded (the event stays due) and ctx's error is
// returned. sendErr is send's error.
func (s *Store) Deliver(ctx context.Context, id int64, send func(context.Context, Event) error,
	retryIn func(failures int) time.Duration) (d Delivery, sendErr error, err error) {
	db := context.WithoutCancel(ctx)
	lockCtx, cancel := context.WithTimeout(db, recordTimeout)
	defer cancel()
	tx, err := s.pool.Begin(lockCtx)
	if err != nil {
		return DeliverySkipped, nil, fmt.Errorf("deliver event %d: %w", id, err)
	}
	defer tx.Rollback(db) //nolint:errcheck // a no-op after Commit
	var ev Event
	err = tx.QueryRow(lockCtx, `
		WITH locked AS (
		    SELECT id, attempts FROM events WHERE id = $1 AND delivered_at IS NULL
		      AND (next_attempt_at IS NULL OR next_attempt_at <= clock_timestamp())
		    FOR UPDATE SKIP LOCKED)
		SELECT m.id, m.type, m.envelope_id, m.data, m.created_at, l.attempts
		FROM locked l JOIN event_messages m ON m.id = l.id`, id).
		Scan(&ev.ID, &ev.Type, &ev.EnvelopeID, &ev.Data, &ev.CreatedAt, &ev.Attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return DeliverySkipped, nil, nil
	}
	if err != nil {
		return DeliverySkipped, nil, fmt.Errorf("deliver event %d: %w", id, err)
	}
	sendErr = send(ctx, ev)
	if ctx.Err() != nil {
		return DeliverySkipped, sendErr, ctx.Err()
	}
	recCtx, cancelRec := context.WithTimeout(db, recordTimeout)
	defer cancelRec()
	d = Delivered
	if sendErr == nil {
		_, err = tx.Exec(recCtx, `UPDATE events SET delivered_at = clock_timestamp(), next_attempt_at = NULL
			WHERE id = $1`, id)
	} else {
		d = DeliveryFailed
		_, err = tx.Exec(recCtx, `UPDATE events SET attempts = attempts + 1, last_error = left($3, 500),
			next_attempt_at = clock_timestamp() + $2 * interval '1 microsecond'
			WHERE id = $1`, id, retryIn(ev.Attempts+1).Microseconds(), sendErr.Error())
	}
	if err == nil {
		err = tx.Commit(recCtx)
	}
	if err != nil {
		return DeliverySkipped, sendErr, fmt.Errorf("record delivery of event %d: %w", id, err)
	}
	return d, sendErr, nil
}

// PruneEvents deletes events created before cutoff (only delivered ones
// when deliveredOnly), looking at up to limit events with ids above after.
// It returns how many it deleted, the last id it looked at, and done when it
// reached the end or events newer than cutoff (ids and created_at grow
// together, so everything after those is newer too).
func (s *Store) PruneEvents(ctx context.Context, cutoff time.Time, deliveredOnly bool, after int64, limit int) (
	deleted int, last int64, done bool, err error) {
	err = s.pool.QueryRow(ctx, `
		WITH page AS (SELECT id, created_at FROM events WHERE id > $1 ORDER BY id LIMIT $2),
		gone AS (
		    DELETE FROM events e USING page p
		    WHERE e.id = p.id AND e.created_at < $3 AND (e.delivered_at IS NOT NULL OR NOT $4)
		    RETURNING e.id)
		SELECT (SELECT count(*) FROM gone), coalesce((SELECT max(id) FROM page), $1),
		       (SELECT count(*) FROM page) < $2 OR EXISTS (SELECT 1 FROM page WHERE created_at >= $3)`,
		after, limit, cutoff, deliveredOnly).Scan(&deleted, &last, &done)
	if err != nil {
		return 0, after, false, fmt.Errorf("prune events: %w", err)
	}
	return deleted, last, done, nil
}
