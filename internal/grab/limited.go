package grab

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/envelope"
	"redpacket/internal/ids"
	"redpacket/internal/limits"
	"redpacket/internal/redisstore"
	"redpacket/internal/reqctx"
)

// grabLimited is grab within the user's limits. The grab is admitted first
// (a token of the user's bucket and a packet of the user's day, reserved on
// the user's slot), then sent to the envelope's shard; a grab that took no
// packet gives its reservation back. So the day's count never passes the
// cap, however the user's grabs spread over envelopes, shards and cluster
// masters. A grab whose outcome is unknown (Redis failed) keeps its
// reservation: the count may then undercount what the user may still get,
// never the other way. A refused grab still answers a holder's repeat.
//
// A grab of an envelope this process has seen finished (sold out, expired)
// is first sent unreserved, and answered so (a holder's repeat, or the
// refusal) without touching the user's limits: it can take nothing. Only if
// the envelope has packets again (an operator reloaded it) does the script
// turn it back, and it goes the reserved way.
func (s *Service) grabLimited(ctx context.Context, id int64, userID, password string, now time.Time) (redisstore.Claim, error) {
	l := s.safety.limiter
	if !l.LimitsGrabs() {
		return s.grab(ctx, id, userID, password, now)
	}
	if err := envelope.ValidateUserID("user_id", userID); err != nil {
		return redisstore.Claim{}, err
	}
	if id <= 0 {
		return redisstore.Claim{}, ErrNotFound
	}
	if s.safety.finished.has(id) {
		c, err := s.grabAs(ctx, id, userID, password, true, now)
		if !errors.Is(err, redisstore.ErrUnreserved) {
			return c, err
		}
		s.safety.finished.forget(id)
	}
	c, err := s.grabReserved(ctx, id, userID, password, now)
	if errors.Is(err, ErrSoldOut) || errors.Is(err, ErrExpired) {
		s.safety.finished.add(id)
	}
	return c, err
}

// grabReserved is grabLimited's reserved way: admit, grab, and give back
// what a grab that took nothing reserved.
func (s *Service) grabReserved(ctx context.Context, id int64, userID, password string, now time.Time) (redisstore.Claim, error) {
	l := s.safety.limiter
	client, _ := reqctx.ClientName(ctx)
	res, err := l.AdmitGrab(ctx, client, userID, now)
	var rl *limits.RateLimitedError
	switch {
	case errors.Is(err, limits.ErrExceeded), errors.As(err, &rl):
		return s.repeatOnly(ctx, id, userID, password, err, now)
	case err != nil:
		return redisstore.Claim{}, fmt.Errorf("%w: user limits: %w", ErrUnavailable, err)
	}
	c, err := s.grab(ctx, id, userID, password, now)
	if tookNothing(c, err) {
		// (A caller gone while its reservation was made is never sent:
		// given back too.)
		// Given back even if the caller went away: a reservation kept
		// would count a packet the user never got.
		rctx := context.WithoutCancel(ctx)
		if rerr := l.Release(rctx, res, err == nil && c.Repeat); rerr != nil {
			reqctx.Logger(ctx, s.log).Warn("user's reserved grab not given back; the day's count is one high",
				zap.Error(rerr))
		}
	}
	return c, err
}

// tookNothing reports a grab that certainly took no packet: a refusal, or
// an unavailable envelope or order numbers the script answered (suspended,
// not in Redis, no number to give), or a grab never sent. Only a grab whose
// answer was lost or not confirmed keeps its reservation.
func tookNothing(c redisstore.Claim, err error) bool {
	switch {
	case err == nil:
		return c.Repeat
	case errors.Is(err, ErrSoldOut), errors.Is(err, ErrExpired), errors.Is(err, ErrNotFound),
		errors.Is(err, ids.ErrExhausted), errors.Is(err, ErrNotStarted), errors.Is(err, ErrNotRecipient),
		errors.Is(err, ErrWrongPassword):
		return true
	}
	return redisstore.TookNothing(err)
}

// repeatOnly answers a grab the user's limits refused: the packet the user
// holds (a holder's repeat is never limited), else the refusal. It is one
// unreserved grab: the script answers a holder's repeat before any other
// check and takes nothing where it would take a packet, so the refused grab
// cannot take one. (A read of the user's claim followed by a grab could, if
// the claim went between the two, as an operator's reload of the envelope
// does.) An envelope Redis does not hold is answered from PostgreSQL, which
// never grants.
func (s *Service) repeatOnly(ctx context.Context, id int64, userID, password string, refusal error,
	now time.Time) (redisstore.Claim, error) {
	c, err := s.grabAs(ctx, id, userID, password, true, now)
	switch {
	case err == nil && c.Repeat:
		return c, nil
	case errors.Is(err, ErrUnavailable):
		return redisstore.Claim{}, err
	}
	return redisstore.Claim{}, refusal
}

// reserveCents counts a create's cents on its sender's day (the day of now,
// the create's own time), and returns what gives them back if no envelope
// is written. A reservation whose answer was lost (the script may have run)
// is given back at once: the create fails having written nothing.
func (s *Service) reserveCents(ctx context.Context, req envelope.CreateRequest, now time.Time) (func(), error) {
	l := s.safety.limiter
	client, _ := reqctx.ClientName(ctx)
	r, err := l.ReserveCents(ctx, client, req.SenderID, req.TotalCents, now)
	giveBack := func() {
		if err := l.ReleaseCents(context.WithoutCancel(ctx), r); err != nil {
			reqctx.Logger(ctx, s.log).Warn("sender's reserved cents not given back", zap.String("client", client),
				zap.String("sender_id", req.SenderID), zap.Int64("cents", req.TotalCents), zap.Error(err))
		}
	}
	switch {
	case errors.Is(err, limits.ErrExceeded):
		return nil, err
	case err != nil:
		giveBack()
		return nil, fmt.Errorf("%w: sender limit: %w", ErrUnavailable, err)
	}
	return giveBack, nil
}
