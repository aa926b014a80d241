package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/envelope"
)

// EventsChannel is the channel PostgreSQL notifies when events commit (a
// trigger on events, see migrations/000005_events); the payload is the
// highest id a statement wrote. Listen subscribes a connection to it.
const EventsChannel = "redpacket_events"

// Event is an event as the view event_messages shows it: a durable fact the
// campaign backend acts on. ID is its position: ids are unique, handed out
// without gaps, and become visible in increasing order.
type Event struct {
	ID         int64
	Type       envelope.EventType
	EnvelopeID int64
	Data       json.RawMessage // a JSON object; its fields depend on Type
	CreatedAt  time.Time
	Attempts   int // failed webhook deliveries so far
}

// Events are written by the statements that change envelopes and packets,
// in the same statement: each collects its events in a CTE new_events and
// ends with the same few lines, which take the ids through the SQL function
// take_event_ids (see migrations/000007_typed_values and
// internal/db/query). So an event exists if and only if its change
// committed, and ids become visible in increasing order, without gaps. The
// packet.claimed events of the claims the flusher appends are not rows:
// AddClaims takes their positions the same way and records them in
// claim_event_runs, one row per envelope of the batch, and the reads below
// merge them with the events rows (migrations/000017_claim_events).

// EventsAfter returns up to limit events with ids above after, in id order.
// Because ids become visible in order, a reader that continues from the last
// id it was given never misses one.
func (s *Store) EventsAfter(ctx context.Context, after int64, limit int) ([]Event, error) {
	rows, err := s.q.EventsAfter(ctx, dbsqlc.EventsAfterParams{After: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("read events after %d: %w", after, err)
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		out[i] = Event{ID: r.ID, Type: r.Type, EnvelopeID: r.EnvelopeID, Data: r.Data,
			CreatedAt: r.CreatedAt, Attempts: int(r.Attempts)}
	}
	return out, nil
}

// Listen subscribes conn to EventsChannel.
func Listen(ctx context.Context, conn *pgx.Conn) error {
	if err := dbsqlc.New(conn).ListenEvents(ctx); err != nil {
		return fmt.Errorf("listen on %s: %w", EventsChannel, err)
	}
	return nil
}
