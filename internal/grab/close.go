package grab

import (
	"context"
	"errors"
	"fmt"
	"time"

	"redpacket/internal/envelope"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
)

// closedKeyTTL is the lifetime a sender's close gives the envelope's Redis
// keys. The flusher settles the envelope within seconds and sets its own
// lifetime then; this one only has to outlast a flusher that is down for a
// while, since settling an envelope whose keys are gone suspends it.
const closedKeyTTL = envelope.MaxExpiresIn + 24*time.Hour

// Close ends an envelope early for its sender: PostgreSQL records the close
// (the envelope is then due for settlement, like an expired one) and Redis
// grants nothing after this returns. Closing again, or closing an envelope
// that is sold out, settled or failed, changes nothing; either way the
// answer is the envelope's status.
func (s *Service) Close(ctx context.Context, id int64) (Status, error) {
	if id <= 0 {
		return Status{}, ErrNotFound
	}
	e, err := s.pg.Envelope(ctx, id)
	switch {
	case errors.Is(err, pgstore.ErrNotFound):
		return Status{}, ErrNotFound
	case err != nil:
		return Status{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	switch e.Status {
	case envelope.StatusLoading:
		// Its Redis state may not be there yet, and a load after the close
		// would open it again: the sender asks again in a moment.
		return Status{}, fmt.Errorf("%w: envelope %d is still loading", ErrUnavailable, id)
	case envelope.StatusOpen, envelope.StatusSuspended:
		if e.Status == envelope.StatusOpen {
			// PostgreSQL says open until the flusher writes the last
			// claim; Redis knows first that nothing is left to close.
			live, err := s.redis.Live(ctx, id)
			if err != nil {
				return Status{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
			if live.Loaded && live.Status == redisstore.MetaOpen && live.Remaining == 0 {
				return s.Status(ctx, id)
			}
		}
		if _, err := s.pg.Close(ctx, id, s.Now()); err != nil {
			return Status{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		// A suspended envelope's Redis state is left as it is (the close
		// script does); its operator's reload reads the new expiry.
		if _, err := s.redis.Close(ctx, id, e.Count, closedKeyTTL); err != nil {
			return Status{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	return s.Status(ctx, id)
}
