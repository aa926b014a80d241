package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/db/dbsqlc"
)

// WithRecoveryLock runs fn holding envelope id's recovery lock: a session
// lock, so that two recoveries of one envelope (two operators, or a script
// run twice) never interleave; the second waits for the first. The lock is
// held on a connection of its own, outside the pool, as the flushers'
// leases are: fn uses the store and its pool as usual, however small the
// pool. Closing the connection gives the lock up.
func (s *Store) WithRecoveryLock(ctx context.Context, id int64, fn func() error) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("recovery lock of envelope %d: %w", id, err)
	}
	defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // closed, the lock is given up
	if err := dbsqlc.New(conn).LockRecovery(ctx, id); err != nil {
		return fmt.Errorf("recovery lock of envelope %d: %w", id, err)
	}
	return fn()
}
