package grab

import (
	"time"

	"redpacket/internal/idempotency"
)

// Safety configures what keeps creates and grabs safe to repeat and within
// bounds: how long idempotency keys live, and the limits on users and
// senders (each off when zero).
type Safety struct {
	IdempotencyTTL time.Duration // 0: idempotency.DefaultTTL
}

// safety is a Service's Safety with its defaults filled in.
type safety struct {
	idempotencyTTL time.Duration
}

func newSafety(c Safety) safety {
	s := safety{idempotencyTTL: c.IdempotencyTTL}
	if s.idempotencyTTL <= 0 {
		s.idempotencyTTL = idempotency.DefaultTTL
	}
	return s
}
