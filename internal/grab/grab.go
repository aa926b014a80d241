package grab

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"redpacket/internal/envelope"
	"redpacket/internal/ids"
	"redpacket/internal/limits"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/telemetry"
)

// Claim is a packet granted to a user, as the service answers a grab.
type Claim struct {
	PacketID    int64
	AmountCents int64
	OrderNo     string    // the grant's order number (see internal/ids)
	GrabbedAt   time.Time // when it was granted, UTC, to the millisecond
	Repeat      bool      // the user had grabbed before: this is that same packet
}

// Grab takes a packet of envelope id for the user, or returns the packet the
// user took before (Claim.Repeat).
func (s *Service) Grab(ctx context.Context, id int64, userID string) (Claim, error) {
	return s.GrabWithPassword(ctx, id, userID, "")
}

// GrabWithPassword is Grab carrying the password the user gave ("": none).
// Only its digest goes further (envelope.PasswordDigest).
func (s *Service) GrabWithPassword(ctx context.Context, id int64, userID, password string) (Claim, error) {
	start := time.Now()
	// One reading of the clock for the whole grab: the day its reservation
	// counts on is the day of its order number and grant (a second reading
	// after the admission could fall on the next day, past the cap).
	c, err := s.grabLimited(ctx, id, userID, password, s.Now())
	telemetry.GrabSeconds.Observe(time.Since(start).Seconds())
	grabCounters[grabResult(c, err)].Inc()
	return Claim{PacketID: c.PacketID, AmountCents: c.AmountCents, OrderNo: c.OrderNo, GrabbedAt: c.GrabbedAt,
		Repeat: c.Repeat}, err
}

// grabCounters are the grab counters by result, looked up once rather than
// hashed from their label on every grab.
var grabCounters = func() map[telemetry.GrabResult]prometheus.Counter {
	m := map[telemetry.GrabResult]prometheus.Counter{}
	for _, r := range telemetry.GrabResults {
		m[r] = telemetry.Grabs.WithLabelValues(string(r))
	}
	return m
}()

// grabResult names a grab's outcome for the metrics.
func grabResult(c redisstore.Claim, err error) telemetry.GrabResult {
	switch {
	case err == nil && c.Repeat:
		return telemetry.GrabRepeat
	case err == nil:
		return telemetry.GrabGranted
	case errors.Is(err, ErrSoldOut):
		return telemetry.GrabSoldOut
	case errors.Is(err, ErrExpired):
		return telemetry.GrabExpired
	case errors.Is(err, ErrNotFound):
		return telemetry.GrabNotFound
	case errors.Is(err, ErrNotStarted):
		return telemetry.GrabNotStarted
	case errors.Is(err, ErrNotRecipient):
		return telemetry.GrabNotRecipient
	case errors.Is(err, ErrWrongPassword):
		return telemetry.GrabWrongPassword
	case errors.Is(err, envelope.ErrInvalid):
		return telemetry.GrabInvalid
	case errors.Is(err, limits.ErrExceeded), errors.As(err, new(*limits.RateLimitedError)):
		return telemetry.GrabLimited
	case errors.Is(err, context.Canceled):
		// The caller went away (a client that hung up) before the answer:
		// not the service failing. A grab already sent still stands.
		return telemetry.GrabCanceled
	}
	return telemetry.GrabUnavailable
}

func (s *Service) grab(ctx context.Context, id int64, userID, password string, now time.Time) (redisstore.Claim, error) {
	return s.grabAs(ctx, id, userID, password, false, now)
}

// grabAs is grab, sent unreserved (redisstore.GrabUnreserved) or not: an
// unreserved grab that would take a packet takes none and returns
// redisstore.ErrUnreserved.
func (s *Service) grabAs(ctx context.Context, id int64, userID, password string, unreserved bool,
	now time.Time) (redisstore.Claim, error) {
	if err := envelope.ValidateUserID("user_id", userID); err != nil {
		return redisstore.Claim{}, err
	}
	if id <= 0 {
		return redisstore.Claim{}, ErrNotFound
	}
	var digest string
	if password != "" {
		digest = envelope.PasswordDigest(id, password)
	}
	// The script numbers the grant itself; a refusal takes no number.
	send := s.redis.GrabWithPassword
	if unreserved {
		send = s.redis.GrabUnreserved
	}
	c, err := send(ctx, id, userID, digest, now)
	switch {
	case err == nil, errors.Is(err, redisstore.ErrUnreserved):
		return c, err
	case errors.Is(err, redisstore.ErrNotStarted):
		return c, ErrNotStarted
	case errors.Is(err, redisstore.ErrNotRecipient):
		return c, ErrNotRecipient
	case errors.Is(err, redisstore.ErrWrongPassword):
		return c, ErrWrongPassword
	case errors.Is(err, redisstore.ErrSoldOut):
		return c, ErrSoldOut
	case errors.Is(err, redisstore.ErrClosed):
		return c, ErrExpired
	case errors.Is(err, redisstore.ErrSuspended):
		return c, fmt.Errorf("%w: envelope %d is suspended until an operator recovers it: %w", ErrUnavailable, id, err)
	case errors.Is(err, redisstore.ErrNotLoaded):
		c, nerr := s.notLoaded(ctx, id, userID)
		if errors.Is(nerr, ErrUnavailable) {
			nerr = fmt.Errorf("%w (%w)", nerr, err) // the script took nothing: tookNothing reads it
		}
		return c, nerr
	case errors.Is(err, redisstore.ErrOrderNumbersExhausted):
		return c, fmt.Errorf("%w: %w", ids.ErrExhausted, err)
	}
	return c, fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// notLoaded answers a grab of an envelope Redis does not hold, from
// PostgreSQL: it never existed; it is finished and its keys have expired (a
// user who holds a packet still gets it back as a repeat); or it is not (or
// no longer) in Redis and must not be offered.
func (s *Service) notLoaded(ctx context.Context, id int64, userID string) (redisstore.Claim, error) {
	e, err := s.pg.Envelope(ctx, id)
	switch {
	case errors.Is(err, pgstore.ErrNotFound):
		return redisstore.Claim{}, ErrNotFound
	case err != nil:
		return redisstore.Claim{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	switch e.Status {
	case envelope.StatusSettled, envelope.StatusSoldOut, envelope.StatusExpired:
		return s.heldClaim(ctx, e, userID)
	case envelope.StatusFailed:
		return redisstore.Claim{}, ErrExpired
	}
	return redisstore.Claim{}, fmt.Errorf("%w: envelope %d is %s and not in redis", ErrUnavailable, id, e.Status)
}

// heldClaim answers a grab of a finished envelope from PostgreSQL.
func (s *Service) heldClaim(ctx context.Context, e pgstore.Envelope, userID string) (redisstore.Claim, error) {
	h, err := s.pg.UserClaim(ctx, e.ID, userID)
	switch {
	case err == nil:
		return redisstore.Claim{PacketID: h.PacketID, AmountCents: h.AmountCents, GrabbedAt: h.ClaimedAt.UTC(),
			OrderNo: h.OrderNo, Repeat: true}, nil
	case !errors.Is(err, pgstore.ErrNotFound):
		return redisstore.Claim{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case e.ClaimedCents == e.TotalCents:
		return redisstore.Claim{}, ErrSoldOut
	}
	return redisstore.Claim{}, ErrExpired
}

// ShortID returns the user's short numeric id, the same one every time.
func (s *Service) ShortID(ctx context.Context, userID string) (int64, error) {
	if err := envelope.ValidateUserID("user_id", userID); err != nil {
		return 0, err
	}
	id, err := s.shortIDs.Get(ctx, userID)
	if err != nil {
		return 0, fmt.Errorf("%w: short id: %w", ErrUnavailable, err)
	}
	return id, nil
}
