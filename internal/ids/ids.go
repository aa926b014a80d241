// Package ids generates the service's public identifiers: order numbers,
// share codes and short user ids. Redis does the counting; PostgreSQL keeps
// what must survive Redis (order_no_reservations, user_short_ids).
//
// Order numbers ("yyyyMMdd" + a fixed-width sequence) are handed out by the
// grab script itself, to grants only, from a counter per shard and day under
// the shard's hash tag; OrderNumbers reserves their ranges in PostgreSQL
// first and fences the counters when Redis may have come back from older
// data (see redisstore/orders.go). Share codes and short ids live under the
// one hash tag {<prefix>:ids} (redisstore.Keys), so each of their scripts
// runs on one node of a Redis Cluster. Share codes ("yyMMdd" + 5 digits) index
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
	// short-id range is full, or a shard's order numbers pass their width
	// (the grab service wraps redisstore.ErrOrderNumbersExhausted with it).
	ErrExhausted = errors.New("identifiers exhausted")
	// ErrClosed is returned by OrderNumbers.Supply after Close. It is the
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
