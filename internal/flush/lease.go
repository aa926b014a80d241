package flush

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/db/dburl"
)

// Leases decide which shards this flusher drains when several run: each
// shard is drained by at most one flusher at a time, through a PostgreSQL
// session advisory lock per shard held on a connection of its own. A flusher
// that dies loses its connection and with it its locks, so the others take
// its shards over on their next round (every LeaseEvery, a second by
// default). Every flusher also holds a shared "member" lock, so each can
// count the flushers alive and hold no more than its share of the shards:
// a flusher that joins gets shards as the others give some up.
//
// A flusher that loses its connection without dying stops draining the
// shards at once; should it still be writing a batch when another takes the
// shard over, the batch is written twice, which changes nothing, and only
// the flusher whose batch is still in flight acknowledges it.
type Leases struct {
	url    string
	shards int
	log    *zap.Logger

	conn  *pgx.Conn
	owned map[int]bool
}

// Advisory lock keys: (leaseClass, shard) for a shard, (memberClass, 0) for
// membership. Picked to stay clear of other users of advisory locks.
const (
	leaseClass  = 0x72706c73 // "rpls"
	memberClass = 0x72706d62 // "rpmb"
)

// NewLeases returns leases over shards, taken on a connection to url.
func NewLeases(url string, shards int, log *zap.Logger) *Leases {
	return &Leases{url: url, shards: shards, log: log, owned: map[int]bool{}}
}

// Owned returns the shards held now, in order.
func (l *Leases) Owned() []int {
	out := make([]int, 0, len(l.owned))
	for s := range l.owned {
		out = append(out, s)
	}
	sort.Ints(out)
	return out
}

// Refresh reconnects if need be, then takes or gives up shards so this
// flusher holds its share. It returns the shards held afterwards; on an
// error it holds none.
func (l *Leases) Refresh(ctx context.Context) ([]int, error) {
	if err := l.connect(ctx); err != nil {
		return nil, err
	}
	members, err := l.members(ctx)
	if err != nil {
		return nil, l.lost(err)
	}
	share := (l.shards + members - 1) / members
	var took, gaveUp []int
	for _, s := range l.Owned() {
		if len(l.owned) <= share {
			break
		}
		if err := l.release(ctx, s); err != nil {
			return nil, l.lost(err)
		}
		gaveUp = append(gaveUp, s)
	}
	start := rand.IntN(l.shards) // spread the first tries of flushers starting together
	for i := range l.shards {
		if len(l.owned) >= share {
			break
		}
		s := (start + i) % l.shards
		if l.owned[s] {
			continue
		}
		got, err := dbsqlc.New(l.conn).TryLockShard(ctx, dbsqlc.TryLockShardParams{Class: leaseClass, Shard: int32(s)})
		if err != nil {
			return nil, l.lost(err)
		}
		if got {
			l.owned[s] = true
			took = append(took, s)
		}
	}
	l.logChange(took, gaveUp, members)
	return l.Owned(), nil
}

// logChange writes one line for a refresh that took or gave up shards: a
// flusher starting alone takes every shard in one refresh, and one line
// says so.
func (l *Leases) logChange(took, gaveUp []int, members int) {
	fields := []zap.Field{zap.Ints("held", l.Owned()), zap.Int("flushers", members)}
	switch {
	case len(took) > 0:
		sort.Ints(took)
		if len(gaveUp) > 0 {
			fields = append(fields, zap.Ints("gave_up", gaveUp))
		}
		l.log.Info("took shard leases", append(fields, zap.Ints("took", took))...)
	case len(gaveUp) > 0:
		l.log.Info("gave up shard leases to other flushers", append(fields, zap.Ints("gave_up", gaveUp))...)
	}
}

func (l *Leases) connect(ctx context.Context) error {
	if l.conn != nil && !l.conn.IsClosed() {
		return nil
	}
	l.owned = map[int]bool{}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cfg, err := dburl.SessionConfig(l.url)
	if err != nil {
		return fmt.Errorf("connect for shard leases: %w", err)
	}
	// A flusher whose host died must not keep its shards for hours.
	dburl.KeepLocksAlive(cfg.RuntimeParams)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return fmt.Errorf("connect for shard leases: %w", err)
	}
	if err := dbsqlc.New(conn).JoinFlushers(cctx, memberClass); err != nil {
		_ = conn.Close(ctx)
		return fmt.Errorf("join the flushers: %w", err)
	}
	l.conn = conn
	return nil
}

// members counts the flushers holding the member lock, this one included.
func (l *Leases) members(ctx context.Context) (int, error) {
	n, err := dbsqlc.New(l.conn).CountFlushers(ctx, memberClass)
	return max(int(n), 1), err
}

func (l *Leases) release(ctx context.Context, shard int) error {
	if err := dbsqlc.New(l.conn).UnlockShard(ctx, dbsqlc.UnlockShardParams{Class: leaseClass, Shard: int32(shard)}); err != nil {
		return err
	}
	delete(l.owned, shard)
	return nil
}

// lost drops the connection, and with it every lock, after an error: what
// this flusher held can no longer be known.
func (l *Leases) lost(err error) error {
	l.Close()
	return fmt.Errorf("shard leases: %w", err)
}

// Close gives every lease up: ending the session ends its locks, at once or
// when PostgreSQL sees the connection gone (a second bounds the goodbye to
// a server that does not answer).
func (l *Leases) Close() {
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = l.conn.Close(ctx)
		cancel()
		l.conn = nil
	}
	l.owned = map[int]bool{}
}
