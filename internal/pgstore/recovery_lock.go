package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/db/dburl"
)

// ErrRecoveryLockLost means the session holding an envelope's recovery lock
// ended (a DBA terminated it, a server timeout): another recovery may have
// started, so the step about to be taken was not.
var ErrRecoveryLockLost = errors.New("the recovery lock was lost")

// WithRecoveryLock runs fn holding envelope id's recovery lock: a session
// lock, so that two recoveries of one envelope (two operators, or a script
// run twice) never interleave; the second waits for the first. The lock is
// held on a connection of its own, outside the pool, as the flushers'
// leases are: fn uses the store and its pool as usual, however small the
// pool. Closing the connection gives the lock up. fn calls held before each
// step that changes the envelope: the lock lasts as long as its session,
// which could end under it.
func (s *Store) WithRecoveryLock(ctx context.Context, id int64, fn func(held func(context.Context) error) error) error {
	cfg := s.pool.Config().ConnConfig.Copy()
	dburl.KeepLocksAlive(cfg.RuntimeParams) // an operator's host that dies frees the envelope in seconds
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("recovery lock of envelope %d: %w", id, err)
	}
	defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // closed, the lock is given up
	if err := dbsqlc.New(conn).LockRecovery(ctx, id); err != nil {
		return fmt.Errorf("recovery lock of envelope %d: %w", id, err)
	}
	return fn(func(ctx context.Context) error {
		// A session lock is held while its session lives.
		if err := conn.Ping(ctx); err != nil {
			return fmt.Errorf("envelope %d: %w: %w", id, ErrRecoveryLockLost, err)
		}
		return nil
	})
}
