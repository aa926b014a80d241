package flush

import "time"

// shardRetries keeps when each shard whose batch failed is tried again. A
// shard fails alone more often than not (its Cluster slot migrating to
// another master answers TRYAGAIN, its master is unreachable, a batch of it
// PostgreSQL refuses): it waits out its own backoff, doubling from
// backoffStart up to MaxBackoff, while the other shards flush at their
// pace. Shards that fail in one pass (PostgreSQL down) share their retry
// time, so they are retried, and logged, together. Only Run's goroutine
// uses it.
type shardRetries map[int]shardRetry

type shardRetry struct {
	at      time.Time // not tried before
	backoff time.Duration
}

// due reports whether shard may be tried at now.
func (r shardRetries) due(shard int, now time.Time) bool {
	return !now.Before(r[shard].at)
}

// failed puts shard off from passStart, the start of the pass it failed
// in, and returns for how long.
func (r shardRetries) failed(shard int, passStart time.Time, maxBackoff time.Duration) time.Duration {
	b := grow(r[shard].backoff, maxBackoff)
	r[shard] = shardRetry{at: passStart.Add(b), backoff: b}
	return b
}

// grow is the backoff after one more failure in a row: backoffStart after
// the first (b is 0), then doubling up to maxBackoff.
func grow(b, maxBackoff time.Duration) time.Duration {
	return max(backoffStart, min(2*b, maxBackoff))
}
