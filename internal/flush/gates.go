package flush

import (
	"context"

	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
)

// gates are the checks an envelope's grabs pass, as PostgreSQL holds them,
// for loading or reloading it into Redis: its start, password digest and
// recipients.
func (f *Flusher) gates(ctx context.Context, e pgstore.Envelope) (redisstore.Gates, error) {
	var g redisstore.Gates
	if e.StartsAt != nil {
		g.StartsAt = *e.StartsAt
	}
	if e.PasswordDigest != nil {
		g.PasswordDigest = *e.PasswordDigest
	}
	if e.RecipientsCount > 0 {
		r, err := f.pg.Recipients(ctx, e.ID)
		if err != nil {
			return g, err
		}
		g.Recipients = r
	}
	return g, nil
}
