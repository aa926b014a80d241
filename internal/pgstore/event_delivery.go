package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/db/dbsqlc"
)

// Webhook delivery state lives with the events themselves: on an events
// row, delivered_at once the receiver accepted it, and attempts,
// next_attempt_at and last_error while it does not; on a claim_event_runs
// row, delivered_through (the last of its claim events accepted) and the
// same retry columns for the next one. An envelope's events are delivered
// in order, so only its first undelivered event (its head) is ever tried,
// and the retry columns of the row that holds it are the envelope's
// backoff. A sender holds that row's lock (FOR UPDATE) while it calls the
// receiver, so several processes can send at once without two of them
// sending one envelope's events: the next event of an envelope is only
// looked at once the one before it is recorded delivered, and positions of
// an envelope only grow (events become visible in position order).

// DeliveryHeads returns up to limit envelopes' first undelivered events
// whose retry is due, for envelopes above afterEnvelope in id order and not
// in skip. It walks the pending index one envelope at a time (a loose index
// scan: one probe per envelope, however many events each has waiting) and
// stops once limit heads are found.
func (s *Store) DeliveryHeads(ctx context.Context, afterEnvelope int64, skip []int64, limit int) ([]Event, error) {
	if skip == nil {
		skip = []int64{}
	}
	rows, err := s.q.DeliveryHeads(ctx, dbsqlc.DeliveryHeadsParams{
		AfterEnvelope: afterEnvelope, Skip: skip, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("find events to deliver: %w", err)
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		out[i] = Event{ID: r.ID, Type: r.Type, EnvelopeID: r.EnvelopeID, Data: r.Data,
			CreatedAt: r.CreatedAt, Attempts: r.Attempts}
	}
	return out, nil
}

// NextUndelivered returns the id of an envelope's first undelivered event,
// 0 when it has none.
func (s *Store) NextUndelivered(ctx context.Context, envelopeID int64) (int64, error) {
	id, err := s.q.NextUndelivered(ctx, envelopeID)
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
// a send that failed (most likely cut short by it), nothing is recorded
// (the event stays due) and ctx's error is returned; a send the receiver
// accepted is recorded even then, or the event would be sent again after a
// restart. sendErr is send's error. maxSend bounds how long send may take
// (WEBHOOK_TIMEOUT): the transaction may sit idle that long, whatever
// idle_in_transaction_session_timeout the database sets; 0 leaves it.
func (s *Store) Deliver(ctx context.Context, id int64, maxSend time.Duration, send func(context.Context, Event) error,
	retryIn func(failures int) time.Duration) (d Delivery, sendErr error, err error) {
	db := context.WithoutCancel(ctx)
	lockCtx, cancel := context.WithTimeout(db, recordTimeout)
	defer cancel()
	tx, err := s.pool.Begin(lockCtx)
	if err != nil {
		return DeliverySkipped, nil, fmt.Errorf("deliver event %d: %w", id, err)
	}
	defer tx.Rollback(db) //nolint:errcheck // a no-op after Commit
	q := s.q.WithTx(tx)
	if maxSend > 0 {
		// Idle while send runs: a shorter limit on the database would end
		// the session before an accepted event is recorded.
		ms := strconv.FormatInt((maxSend + recordTimeout).Milliseconds(), 10)
		if err := q.LocalIdleInTransactionTimeout(lockCtx, ms); err != nil {
			return DeliverySkipped, nil, fmt.Errorf("deliver event %d: %w", id, err)
		}
	}
	row, err := q.LockDueEvent(lockCtx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return DeliverySkipped, nil, nil
	}
	if err != nil {
		return DeliverySkipped, nil, fmt.Errorf("deliver event %d: %w", id, err)
	}
	ev := Event{ID: row.ID, Type: row.Type, EnvelopeID: row.EnvelopeID, Data: row.Data,
		CreatedAt: row.CreatedAt, Attempts: int(row.Attempts)}
	sendErr = send(ctx, ev)
	if sendErr != nil && ctx.Err() != nil {
		return DeliverySkipped, sendErr, ctx.Err()
	}
	recCtx, cancelRec := context.WithTimeout(db, recordTimeout)
	defer cancelRec()
	d = Delivered
	if sendErr == nil {
		err = q.MarkEventDelivered(recCtx, id)
	} else {
		d = DeliveryFailed
		err = q.MarkEventFailed(recCtx, dbsqlc.MarkEventFailedParams{
			ID: id, RetryInUs: retryIn(ev.Attempts + 1).Microseconds(), LastError: sendErr.Error(),
		})
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
	r, err := s.q.PruneEvents(ctx, dbsqlc.PruneEventsParams{
		After: after, MaxRows: int32(limit), Cutoff: cutoff, DeliveredOnly: deliveredOnly,
	})
	if err != nil {
		return 0, after, false, fmt.Errorf("prune events: %w", err)
	}
	return int(r.Deleted), r.Last, r.Done, nil
}

// PruneClaimEvents is PruneEvents for the claim events of claim_event_runs:
// it looks at up to limit runs with first positions above after, deletes
// whole runs (only those delivered whole when deliveredOnly), and counts
// the events they held.
func (s *Store) PruneClaimEvents(ctx context.Context, cutoff time.Time, deliveredOnly bool, after int64, limit int) (
	deleted int, last int64, done bool, err error) {
	r, err := s.q.PruneClaimEvents(ctx, dbsqlc.PruneClaimEventsParams{
		After: after, MaxRows: int32(limit), Cutoff: cutoff, DeliveredOnly: deliveredOnly,
	})
	if err != nil {
		return 0, after, false, fmt.Errorf("prune claim events: %w", err)
	}
	return int(r.Deleted), r.Last, r.Done, nil
}

// RecordWebhooks records whether the flushers send webhooks, for the
// operator commands run without their settings (flusher retention keeps
// envelopes whose events wait for the receiver). Each flusher records its
// own at start; they are to agree. changed tells that another was recorded
// before (a flusher started with another WEBHOOK_URL, or webhooks turned on
// or off).
func (s *Store) RecordWebhooks(ctx context.Context, on bool) (changed bool, err error) {
	var v int64
	if on {
		v = 1
	}
	prev, err := s.q.RecordServiceSetting(ctx, dbsqlc.RecordServiceSettingParams{Setting: "webhooks", Value: v})
	if err != nil {
		return false, fmt.Errorf("record whether webhooks are sent: %w", err)
	}
	return prev >= 0 && prev != v, nil
}

// RecordEventsRetention records the flushers' EVENTS_RETENTION, which
// `flusher retention` run from cron without their settings must not go
// below (an envelope's removal deletes its events), and returns the one
// recorded before (0: none, or the same).
func (s *Store) RecordEventsRetention(ctx context.Context, d time.Duration) (before time.Duration, err error) {
	v := int64(d / time.Second)
	prev, err := s.q.RecordServiceSetting(ctx, dbsqlc.RecordServiceSettingParams{Setting: "events_retention_s", Value: v})
	if err != nil {
		return 0, fmt.Errorf("record EVENTS_RETENTION: %w", err)
	}
	if prev < 0 || prev == v {
		return 0, nil
	}
	return time.Duration(prev) * time.Second, nil
}
