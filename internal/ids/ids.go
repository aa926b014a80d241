// Package ids generates the service's public identifiers: order numbers,
// share codes and short user ids. Redis does the counting, under the one hash
// tag {<prefix>:ids} (redisstore.Keys), so every script runs on one node of a
// Redis Cluster; PostgreSQL keeps what must survive Redis (user_short_ids).
//
// Order numbers ("yyyyMMdd" + a fixed-width sequence) come from a per-day
// counter taken in segments and cached by a sequence.Allocator per day, so
// Next normally never waits on Redis. Share codes ("yyMMdd" + 5 digits) index
// a shuffled pool with a per-day counter, so a code does not reveal how many
// envelopes were made that day. Short ids are bits of a Redis bitmap, each
// claimed once and recorded in PostgreSQL, which the bitmap is rebuilt from
// if Redis loses it.
package ids

import (
	"errors"
	"time"

	"redpacket/internal/sequence"
)

var (
	// ErrExhausted is wrapped when a day's share-code pool is used up, the
	// short-id range is full, or an order sequence passes its width.
	ErrExhausted = errors.New("identifiers exhausted")
	// ErrClosed is returned by OrderNumbers.Next after Close. It is the
	// sequence package's error, so errors.Is matches either name.
	ErrClosed = sequence.ErrClosed
)

// dayKeyTTL is how long a day's counter lives after its last use: longer than
// any day (25 hours across a DST change) plus the clock skew between
// processes, short enough that old days do not pile up in Redis.
const dayKeyTTL = 48 * time.Hour

// orDefault returns v, or def when v is the zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// nowOr returns the clock now, or time.Now when it is nil.
func nowOr(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}
