package pgstore

import (
	"context"
	"errors"
	"fmt"

	"redpacket/internal/db/dbsqlc"
)

// WithRecoveryLock runs fn holding envelope id's recovery lock: a session
// lock on a connection of its own, so that two recoveries of one envelope
// (two operators, or a script run twice) never interleave; the second waits
// for the first. fn uses the store as usual, on other connections.
func (s *Store) WithRecoveryLock(ctx context.Context, id int64, fn func() error) (err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("recovery lock of envelope %d: %w", id, err)
	}
	q := dbsqlc.New(conn)
	if err := q.LockRecovery(ctx, id); err != nil {
		conn.Release()
		return fmt.Errorf("recovery lock of envelope %d: %w", id, err)
	}
	defer func() {
		released, uerr := q.UnlockRecovery(context.WithoutCancel(ctx), id)
		if uerr != nil || !released {
			// A connection that may still hold the lock must not go back
			// to the pool: closed, it gives the lock up.
			_ = conn.Hijack().Close(context.WithoutCancel(ctx))
			err = errors.Join(err, fmt.Errorf("release the recovery lock of envelope %d: %v (connection closed)", id, uerr))
			return
		}
		conn.Release()
	}()
	return fn()
}
