package grab

import (
	"time"

	"redpacket/internal/idempotency"
	"redpacket/internal/limits"
)

// Safety configures what keeps creates and grabs safe to repeat and within
// bounds: how long idempotency keys live, and the limits on users and
// senders (each off when zero).
type Safety struct {
	IdempotencyTTL time.Duration   // 0: idempotency.DefaultTTL
	Limiter        *limits.Limiter // nil: no limits
}

// safety is a Service's Safety with its defaults filled in.
type safety struct {
	idempotencyTTL time.Duration
	limiter        *limits.Limiter
	finished       *finishedEnvelopes // envelopes seen finished, for limited grabs
	createMarkTTL  time.Duration      // createMarkTTL; tests shorten it
}

func newSafety(c Safety) safety {
	s := safety{idempotencyTTL: c.IdempotencyTTL, limiter: c.Limiter, finished: newFinishedEnvelopes(),
		createMarkTTL: createMarkTTL}
	if s.idempotencyTTL <= 0 {
		s.idempotencyTTL = idempotency.DefaultTTL
	}
	return s
}
