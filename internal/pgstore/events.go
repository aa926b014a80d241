package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The types of events (the events table, see migrations/000005_events).
const (
	EventPacketClaimed     = "packet.claimed"
	EventEnvelopeSoldOut   = "envelope.sold_out"
	EventEnvelopeSettled   = "envelope.settled"
	EventEnvelopeSuspended = "envelope.suspended"
	EventEnvelopeRecovered = "envelope.recovered"
)

// EventsChannel is the channel PostgreSQL notifies when events commit (a
// trigger on events); the payload is the highest id a statement wrote.
const EventsChannel = "redpacket_events"

// Event is an event as the view event_messages shows it: a durable fact the
// campaign backend acts on. ID is its position: ids are unique, handed out
// without gaps, and become visible in increasing order.
type Event struct {
	ID         int64
	Type       string
	EnvelopeID int64
	Data       json.RawMessage // a JSON object; its fields depend on Type
	CreatedAt  time.Time
	Attempts   int // failed webhook deliveries so far
}

// Writing events. A statement that writes events defines a CTE new_events
// with the columns
//
//	kind int, at timestamptz, ref bigint   (the order of the events within the statement)
//	type text, envelope_id bigint,
//	packet_id bigint, data jsonb           (one of the two: see the events table)
//
// and appends eventsTail, which takes positions and inserts the rows. Why
// the positions come from a locked row rather than a sequence is explained in
// the migration: the UPDATE below waits until every earlier writer has
// committed (or rolled back) and holds the row until this transaction ends,
// so positions are visible in commit order, gap-free. Writers put it in the
// last statement of their transaction so the lock is held only from there
// to the commit; it is taken after every other lock of the statement (the
// UPDATE needs the count of new_events, which needs the statement's other
// work done first), so a writer holding it waits for nothing else. A
// statement that writes no event does not touch the row.
const eventsTail = `
, event_count AS (SELECT count(*) AS n FROM new_events)
, event_pos AS (
    UPDATE sequence_numbers s
    SET current_value = s.current_value + c.n, updated_at = now()
    FROM event_count c
    WHERE s.key_name = 'event' AND c.n > 0
    RETURNING s.current_value - c.n AS base
), event_rows AS (
    INSERT INTO events (id, type, envelope_id, packet_id, data)
    SELECT p.base + row_number() OVER (ORDER BY n.kind, n.at, n.ref), n.type, n.envelope_id, n.packet_id, n.data
    FROM new_events n CROSS JOIN event_pos p
    RETURNING id
)`

// jsonTime renders a timestamptz SQL expression as the API writes times:
// RFC 3339 in UTC with milliseconds, e.g. 2026-11-21T10:00:01.123Z.
func jsonTime(expr string) string {
	return `to_char(` + expr + ` AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
}

// EventsAfter returns up to limit events with ids above after, in id order.
// Because ids become visible in order, a reader that continues from the last
// id it was given never misses one.
func (s *Store) EventsAfter(ctx context.Context, after int64, limit int) ([]Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, type, envelope_id, data, created_at, attempts
		FROM event_messages WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read events after %d: %w", after, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Event])
	if err != nil {
		return nil, fmt.Errorf("read events after %d: %w", after, err)
	}
	return out, nil
}
