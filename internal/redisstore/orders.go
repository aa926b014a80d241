package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	rs "redpacket/internal/redisscript"
)

// Order numbers are "yyyyMMdd" + a per-day sequence of a fixed width. The
// grab script gives one to each packet it grants, from the counter of the
// grab's shard and day (Keys.Orders): counter value c is sequence number
// (c-1)*shards + shard + 1, so the shards' sequences interleave and never
// meet, and refusals and repeats take nothing. A shard hands out counter
// values only up to a ceiling that PostgreSQL reserved first, and only while
// the ceiling was set by the Redis it runs on (see grab.lua and
// order_ceiling.lua): that is how a number is never answered twice, even
// after Redis comes back from older data.

// OrderNumbering tells a Store how to number its grants and supplies the
// ceilings; ids.OrderNumbers is the one the daemons use.
type OrderNumbering interface {
	// Date is the day of an instant as yyyyMMdd, in the numbering's time
	// zone: the date of the grab's order number.
	Date(t time.Time) string
	// Width is the number of digits after the date, 1..18.
	Width() int
	// Supply returns once the shard has numbers for the day again, or fails:
	// it raises the ceiling, or fences the counter when short.Identity is set.
	Supply(ctx context.Context, short *OrderShortage) error
	// Remaining is told, after a call that granted packets, how many numbers
	// the shard has left under its ceiling for the day. It must not block:
	// it starts a raise in the background when few are left.
	Remaining(shard int, date string, left int64)
}

// ErrOrderNumbersExhausted means a shard has handed out every number its
// day's width holds.
var ErrOrderNumbersExhausted = errors.New("order numbers of the day used up")

// OrderShortage is the error of a grab that found a packet but no order
// number to give it: the shard's ceiling for the day was reached, or was set
// by another Redis than the one now serving the shard (Identity is then
// this one's, and the counter must be fenced before numbers are handed out).
// Nothing was taken; the grab is asked again once numbers are supplied.
type OrderShortage struct {
	Shard    int
	Date     string
	Identity string
}

func (e *OrderShortage) Error() string {
	if e.Identity != "" {
		return fmt.Sprintf("order numbers of shard %d on %s: redis %s did not set their ceiling", e.Shard, e.Date, e.Identity)
	}
	return fmt.Sprintf("order numbers of shard %d on %s: ceiling reached", e.Shard, e.Date)
}

// maxExact is the largest integer a Lua number holds exactly (2^53 - 1):
// no sequence number, cent amount or sum the scripts compute may pass it.
const maxExact = 1<<53 - 1

// NumberOrders makes the store number its grants with n. Call it before
// Coalesce and before the first Grab.
func (s *Store) NumberOrders(n OrderNumbering) {
	w := n.Width()
	limit := int64(maxExact) + 1 // sequence numbers stay below 2^53 ...
	if w < 16 {
		limit = pow10(w) // ... and below 10^width
	}
	s.numbering = n
	s.orderWidth = strconv.Itoa(w)
	s.maxCounter = make([]int64, s.keys.Shards())
	for shard := range s.maxCounter {
		s.maxCounter[shard] = maxOrderCounter(limit, s.keys.Shards(), shard)
	}
}

// MaxOrderCounter is the most numbers a shard can hand out in a day (after
// NumberOrders): its largest counter value whose number fits the width.
func (s *Store) MaxOrderCounter(shard int) int64 { return s.maxCounter[shard] }

// maxOrderCounter is the largest counter value of a shard whose sequence
// number, (c-1)*shards + shard + 1, is below limit; 0 when none is.
func maxOrderCounter(limit int64, shards, shard int) int64 {
	top := limit - 1 - int64(shard) - 1 // (c-1)*shards <= top
	if top < 0 {
		return 0
	}
	return top/int64(shards) + 1
}

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

// OrderCeiling is a shard's order-number hash of a day after a raise.
type OrderCeiling struct {
	Counter int64 // the last counter value handed out
	Ceiling int64 // the highest one it may hand out
}

// RaiseOrderCeiling records in Redis that PostgreSQL reserved the counter
// values (old, new] of a shard's day. With fenceFor empty it is a raise; it
// is refused with an *OrderShortage naming this Redis when the ceiling was
// set by another one (reserve again, after that answer, and call with
// fenceFor set to that identity). With fenceFor set to the identity of this
// Redis, the counter is fenced: moved to old, above every number answered
// before. See order_ceiling.lua.
func (s *Store) RaiseOrderCeiling(ctx context.Context, shard int, date string, old, new int64, fenceFor string) (OrderCeiling, error) {
	ttl := int64(orderKeyTTL / time.Second)
	code, payload, err := ceilingScript.Run(ctx, s.rdb, []string{s.keys.Orders(shard, date)}, old, new, fenceFor, ttl)
	if err != nil {
		return OrderCeiling{}, fmt.Errorf("raise order ceiling of shard %d on %s: %w", shard, date, err)
	}
	if code == ceilingFence {
		id, err := rs.String(payload)
		if err != nil {
			return OrderCeiling{}, fmt.Errorf("raise order ceiling of shard %d on %s: %w", shard, date, err)
		}
		return OrderCeiling{}, &OrderShortage{Shard: shard, Date: date, Identity: id}
	}
	l, err := rs.List(payload, 2)
	var c OrderCeiling
	if err == nil {
		if c.Counter, err = rs.Int(l[0]); err == nil {
			c.Ceiling, err = rs.Int(l[1])
		}
	}
	if err != nil {
		return OrderCeiling{}, fmt.Errorf("raise order ceiling of shard %d on %s: %w", shard, date, err)
	}
	return c, nil
}

// orderKeyTTL is how long a shard's order hash of a day lives after its last
// raise: longer than any day (25 hours across a DST change) plus the clock
// skew between processes. A hash that expired too soon is only fenced again.
const orderKeyTTL = 48 * time.Hour
