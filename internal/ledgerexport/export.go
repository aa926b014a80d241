// Package ledgerexport writes every money movement of a range of days for
// reconciliation (`flusher export`): the money senders put into envelopes
// (funded), the packets users received (claimed) and what went back to the
// senders (refunded). It reads PostgreSQL a page at a time by key, so it
// runs in constant memory however many days it covers.
package ledgerexport

import (
	"context"
	"fmt"
	"time"

	"redpacket/internal/envelope"
	"redpacket/internal/ids"
	"redpacket/internal/pgstore"
)

// Kind is what a money movement is.
type Kind string

// The kinds of money movement. For a settled envelope whose whole life lies
// in the range, funded = claimed + refunded.
const (
	Funded   Kind = "funded"   // the sender put the total into the envelope, when it was created
	Claimed  Kind = "claimed"  // a user received a packet, when it was grabbed
	Refunded Kind = "refunded" // what nobody claimed went back to the sender, at settlement
)

// Movement is one money movement.
type Movement struct {
	Time        time.Time
	EnvelopeID  int64
	SenderID    string
	UserID      string // the receiver of a claimed packet; empty otherwise
	Kind        Kind
	AmountCents int64
	PacketID    int64 // the packet of a claim; 0 otherwise
}

// Sink receives the movements one at a time.
type Sink func(Movement) error

// pageSize is how many rows one query reads (a variable for the tests).
var pageSize = 5000

// claimWindow is how long before a range an envelope can have been created
// and still have claims in it: a grab is served only until the envelope
// expires, at most envelope.MaxExpiresIn after its start, which is at most
// envelope.MaxStartsAhead after its creation. The minute over it covers
// the clocks of the processes that stamp the creation and the grabs.
const claimWindow = envelope.MaxStartsAhead + envelope.MaxExpiresIn + time.Minute

// Range is the instants of the days from, to (inclusive) in loc: [Since,
// Until), each day from its first instant, as order numbers count days
// (ids.DayStart: also where a zone's clocks skip midnight).
func Range(from, to string, loc *time.Location) (since, until time.Time, err error) {
	f, err := time.Parse(time.DateOnly, from)
	if err != nil {
		return since, until, fmt.Errorf("-from: want YYYY-MM-DD: %w", err)
	}
	t, err := time.Parse(time.DateOnly, to)
	if err != nil {
		return since, until, fmt.Errorf("-to: want YYYY-MM-DD: %w", err)
	}
	if t.Before(f) {
		return since, until, fmt.Errorf("-to %s is before -from %s", to, from)
	}
	return ids.DayStart(f.Year(), f.Month(), f.Day(), loc), ids.DayStart(t.Year(), t.Month(), t.Day()+1, loc), nil
}

// Export sends every movement in [since, until) to sink: the funded
// envelopes by creation time, then the claims by envelope and packet, then
// the refunds by settlement time. All of it is read from one snapshot, so
// an envelope settled or deleted (retention) while the export runs is
// exported as it was when the export began, its three kinds agreeing.
func Export(ctx context.Context, pg *pgstore.Store, since, until time.Time, sink Sink) error {
	return pg.Snapshot(ctx, func(pg *pgstore.Store) error {
		if err := funded(ctx, pg, since, until, sink); err != nil {
			return err
		}
		if err := claimed(ctx, pg, since, until, sink); err != nil {
			return err
		}
		return refunded(ctx, pg, since, until, sink)
	})
}

func funded(ctx context.Context, pg *pgstore.Store, since, until time.Time, sink Sink) error {
	at, id := since.Add(-time.Microsecond), int64(0)
	for {
		rows, err := pg.FundedPage(ctx, since, until, at, id, pageSize)
		if err != nil {
			return err
		}
		for _, r := range rows {
			m := Movement{Time: r.CreatedAt, EnvelopeID: r.ID, SenderID: r.SenderID, Kind: Funded, AmountCents: r.TotalCents}
			if err := sink(m); err != nil {
				return err
			}
			at, id = r.CreatedAt, r.ID
		}
		if len(rows) < pageSize {
			return nil
		}
	}
}

func claimed(ctx context.Context, pg *pgstore.Store, since, until time.Time, sink Sink) error {
	lo, hi, err := pg.EnvelopeIDRange(ctx, since.Add(-claimWindow), until)
	if err != nil || hi < lo {
		return err
	}
	env, packet := lo-1, int64(0)
	for {
		rows, err := pg.ClaimedPage(ctx, since, until, lo, hi, env, packet, pageSize)
		if err != nil {
			return err
		}
		for _, r := range rows {
			m := Movement{Time: r.ClaimedAt, EnvelopeID: r.EnvelopeID, SenderID: r.SenderID, UserID: r.UserID,
				Kind: Claimed, AmountCents: r.AmountCents, PacketID: r.PacketID}
			if err := sink(m); err != nil {
				return err
			}
			env, packet = r.EnvelopeID, r.PacketID
		}
		if len(rows) < pageSize {
			return nil
		}
	}
}

func refunded(ctx context.Context, pg *pgstore.Store, since, until time.Time, sink Sink) error {
	at, id := since.Add(-time.Microsecond), int64(0)
	for {
		rows, err := pg.RefundedPage(ctx, since, until, at, id, pageSize)
		if err != nil {
			return err
		}
		for _, r := range rows {
			m := Movement{Time: r.SettledAt, EnvelopeID: r.ID, SenderID: r.SenderID, Kind: Refunded, AmountCents: r.RefundedCents}
			if err := sink(m); err != nil {
				return err
			}
			at, id = r.SettledAt, r.ID
		}
		if len(rows) < pageSize {
			return nil
		}
	}
}
