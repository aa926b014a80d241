package grab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"redpacket/internal/envelope"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
)

// Status reports envelope id.
func (s *Service) Status(ctx context.Context, id int64) (Status, error) {
	if id <= 0 {
		return Status{}, ErrNotFound
	}
	e, err := s.pg.Envelope(ctx, id)
	return s.status(ctx, e, err)
}

// StatusByCode reports the envelope with a share code ("yyMMdd" + 5 digits).
func (s *Service) StatusByCode(ctx context.Context, code string) (Status, error) {
	if len(code) != shareCodeLen || strings.Trim(code, "0123456789") != "" {
		return Status{}, &envelope.FieldError{Field: "share_code", Problem: "must be 11 digits"}
	}
	e, err := s.pg.EnvelopeByShareCode(ctx, code)
	return s.status(ctx, e, err)
}

const shareCodeLen = 11

func (s *Service) status(ctx context.Context, e pgstore.Envelope, err error) (Status, error) {
	if errors.Is(err, pgstore.ErrNotFound) {
		return Status{}, ErrNotFound
	}
	if err != nil {
		return Status{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	id := e.ID
	live, err := s.redis.Live(ctx, id)
	if err != nil {
		return Status{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if e.Status == envelope.StatusLoading && live.Loaded && live.Status == redisstore.MetaOpen {
		// Redis took the whole load (its meta is written last) and grants
		// grabs, but marking it open in PostgreSQL failed; the flusher's
		// repair records it. Reported as grabs see it, as an open one.
		e.Status = envelope.StatusOpen
	}
	st := statusOf(e)
	if live.Loaded && live.Status != redisstore.MetaFailed && live.Status != redisstore.MetaSuspended {
		// Every grant adds one claim, and closing drops the pool, so the
		// claims are the grabbed count in every state.
		st.GrabbedCount = live.Claims
		st.GrabbedCents = live.GrabbedCents
	} else {
		// Not (or no longer) in Redis: what PostgreSQL holds is all there is.
		if st.GrabbedCount, err = s.pg.ClaimedCount(ctx, id); err != nil {
			return Status{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		st.GrabbedCents = e.ClaimedCents
	}
	switch e.Status {
	case envelope.StatusLoading, envelope.StatusSettled, envelope.StatusFailed:
		// Nothing is offered: not yet, or the rest went back to the sender.
	default:
		st.RemainingCount = int64(e.Count) - st.GrabbedCount
	}
	st.Status = liveStatus(e, live, st.RemainingCount, s.Now())
	if st.Best, err = s.best(ctx, e); err != nil {
		return Status{}, err
	}
	return st, nil
}

// liveStatus is the PostgreSQL status, moved on by what Redis already knows:
// an open envelope with nothing left is sold out (also once closed), one
// past its expiry or closed has expired, before the flusher records either.
// An expired one whose every packet was granted is sold out too, as the
// flusher records once its last claim is written.
func liveStatus(e pgstore.Envelope, live redisstore.Live, remaining int64, now time.Time) envelope.Status {
	if e.Status == envelope.StatusExpired && live.Loaded && remaining == 0 {
		return envelope.StatusSoldOut
	}
	if e.Status != envelope.StatusOpen || !live.Loaded {
		return e.Status
	}
	if live.Status == redisstore.MetaSuspended {
		return envelope.StatusSuspended
	}
	if remaining == 0 {
		return envelope.StatusSoldOut
	}
	if live.Status == redisstore.MetaClosed || now.After(e.ExpiresAt) {
		return envelope.StatusExpired
	}
	return e.Status
}
