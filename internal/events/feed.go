package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"redpacket/internal/envelope"
	"redpacket/internal/pgstore"
)

// ErrUnavailable means the events could not be read (PostgreSQL failed).
var ErrUnavailable = errors.New("events unavailable")

// Message is an event as the feed and the webhooks send it.
type Message struct {
	ID         int64              `json:"id"`
	Type       envelope.EventType `json:"type"`
	EnvelopeID int64              `json:"envelope_id"`
	Data       json.RawMessage    `json:"data"`
	CreatedAt  string             `json:"created_at"`
}

// timeLayout is the API's: RFC 3339, UTC, milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// NewMessage converts a stored event.
func NewMessage(e pgstore.Event) Message {
	return Message{ID: e.ID, Type: e.Type, EnvelopeID: e.EnvelopeID, Data: e.Data,
		CreatedAt: e.CreatedAt.UTC().Format(timeLayout)}
}

// Page is one answer of the feed: the events read and the cursor to read on
// from (the last event's id, or the cursor asked for when there were none).
type Page struct {
	Events    []Message
	NextAfter int64
}

// Reader reads events by position.
type Reader interface {
	EventsAfter(ctx context.Context, after int64, limit int) ([]pgstore.Event, error)
}

// Feed reads events after a cursor, waiting for new ones when asked to.
type Feed struct {
	events   Reader
	listener *Listener
}

// NewFeed returns a feed over the events; listener (nil: no waiting) wakes
// long polls.
func NewFeed(r Reader, listener *Listener) *Feed { return &Feed{events: r, listener: listener} }

// Read returns up to limit events with ids above after, in order. When there
// are none and wait is positive it waits, without polling, until some
// commit, wait passes, or the listener stops (the daemon is shutting down),
// and then answers what there is, read again. It returns ctx's error if ctx
// ends first.
func (f *Feed) Read(ctx context.Context, after int64, limit int, wait time.Duration) (Page, error) {
	var deadline <-chan time.Time
	if wait > 0 && f.listener != nil {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		var changed <-chan struct{}
		if f.listener != nil {
			changed = f.listener.Changed() // before reading: a commit after the read closes it
		}
		evs, err := f.events.EventsAfter(ctx, after, limit)
		if err != nil {
			if ctx.Err() != nil {
				return Page{}, ctx.Err()
			}
			return Page{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		if len(evs) > 0 || deadline == nil {
			return page(evs, after), nil
		}
		select {
		case <-changed:
		case <-deadline:
			// Read once more: a commit the listener did not hear (it was
			// reconnecting) is answered now, not at the next poll.
			deadline = nil
		case <-f.listener.Done():
			return page(nil, after), nil
		case <-ctx.Done():
			return Page{}, ctx.Err()
		}
	}
}

func page(evs []pgstore.Event, after int64) Page {
	p := Page{Events: make([]Message, len(evs)), NextAfter: after}
	for i, e := range evs {
		p.Events[i] = NewMessage(e)
		p.NextAfter = e.ID
	}
	return p
}
