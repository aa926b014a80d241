package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ErrOtherLedger means the Redis a process was given holds, under its key
// prefix, the state of another ledger: a second database (a staging one)
// on the same Redis and prefix would hand out its envelopes' ids again over
// the first's live state and pay its users from them.
var ErrOtherLedger = errors.New("redis holds another ledger's state under this key prefix")

// BindLedger checks that every shard of keys belongs to ledger (the
// database's ledger_id). With write (a daemon starting), a shard that names
// none is given it; without (an operator command), only a shard naming
// another ledger is refused. A Redis too full to take the name is let
// through: the check is a guard against a misconfiguration, and a full
// Redis is reported on its own.
func BindLedger(ctx context.Context, rdb redis.UniversalClient, keys Keys, ledger string, write bool) error {
	shards := make([]int, keys.Shards())
	for i := range shards {
		shards[i] = i
	}
	return bindShards(ctx, rdb, keys, shards, ledger, write)
}

// BindShard is BindLedger for one shard, written: the flusher gives a shard
// that lost its data the ledger's name again with its new epoch, before a
// process of another ledger could take it.
func (s *Store) BindShard(ctx context.Context, shard int, ledger string) error {
	return bindShards(ctx, s.rdb, s.keys, []int{shard}, ledger, true)
}

func bindShards(ctx context.Context, rdb redis.UniversalClient, keys Keys, shards []int, ledger string, write bool) error {
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, shard := range shards {
			if write {
				p.SetArgs(ctx, keys.Ledger(shard), ledger, redis.SetArgs{Mode: "NX", Get: true})
			} else {
				p.Get(ctx, keys.Ledger(shard))
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !redis.HasErrorPrefix(err, "OOM") {
		return fmt.Errorf("read the ledger names of the redis shards: %w", err)
	}
	for i, c := range cmds {
		shard := shards[i]
		found, err := c.(interface{ Result() (string, error) }).Result()
		switch {
		case errors.Is(err, redis.Nil) || redis.HasErrorPrefix(err, "OOM"):
		case err != nil:
			return fmt.Errorf("read the ledger name of redis shard %d: %w", shard, err)
		case found != ledger:
			return fmt.Errorf("%w: key %s names ledger %s, and this database is ledger %s (shared_settings.ledger_id): "+
				"either another database uses this Redis and prefix (give each its own REDIS_KEY_PREFIX or Redis), "+
				"or this database's ledger_id changed (migration 27 applied again): then delete the shards' keys "+
				"(docs/dba.md, \"Shared settings\")", ErrOtherLedger, keys.Ledger(shard), found, ledger)
		}
	}
	return nil
}
