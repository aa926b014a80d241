package grab

import (
	"context"
	"errors"
	"fmt"

	"redpacket/internal/envelope"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
)

// Grab takes a packet of envelope id for the user, or returns the packet the
// user took before (Claim.Repeat).
func (s *Service) Grab(ctx context.Context, id int64, userID string) (redisstore.Claim, error) {
	if err := envelope.ValidateUserID("user_id", userID); err != nil {
		return redisstore.Claim{}, err
	}
	if id <= 0 {
		return redisstore.Claim{}, ErrNotFound
	}
	// Taken before knowing whether a packet is granted, so the script can
	// record it atomically with the claim; refused grabs leave gaps.
	orderNo, err := s.orderNos.Next(ctx)
	if err != nil {
		return redisstore.Claim{}, fmt.Errorf("%w: order number: %w", ErrUnavailable, err)
	}
	c, err := s.redis.Grab(ctx, id, userID, s.Now(), orderNo)
	switch {
	case err == nil:
		return c, nil
	case errors.Is(err, redisstore.ErrSoldOut):
		return c, ErrSoldOut
	case errors.Is(err, redisstore.ErrClosed):
		return c, ErrExpired
	case errors.Is(err, redisstore.ErrNotLoaded):
		return c, s.whyNotLoaded(ctx, id)
	}
	return c, fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// whyNotLoaded explains a grab of an envelope Redis does not hold, from
// PostgreSQL: it never existed, it is finished and its keys have expired, or
// it is not (or no longer) in Redis and must not be offered.
func (s *Service) whyNotLoaded(ctx context.Context, id int64) error {
	e, err := s.pg.Envelope(ctx, id)
	switch {
	case errors.Is(err, pgstore.ErrNotFound):
		return ErrNotFound
	case err != nil:
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	switch envelope.Status(e.Status) {
	case envelope.StatusExpired, envelope.StatusSettled:
		return ErrExpired
	case envelope.StatusSoldOut:
		return ErrSoldOut
	}
	return fmt.Errorf("%w: envelope %d is %s and not in redis", ErrUnavailable, id, e.Status)
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
