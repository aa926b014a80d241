package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// memNumbering numbers a test store's grants the way ids.OrderNumbers does,
// with the reservations kept in memory instead of PostgreSQL, and every
// shortage supplied in the caller (no background raise, so a test sees no
// goroutine of it).
type memNumbering struct {
	store    *Store
	width    int
	step     int64
	loc      *time.Location
	mu       sync.Mutex
	reserved map[string]int64 // "date/shard" -> reserved_upto
	supplies atomic.Int64     // raises, fences included
	fences   atomic.Int64     // raises that fenced a counter
	lows     atomic.Int64     // Remaining calls below half a step
}

func newMemNumbering(s *Store, width int, step int64, loc *time.Location) *memNumbering {
	m := &memNumbering{store: s, width: width, step: step, loc: loc, reserved: map[string]int64{}}
	s.NumberOrders(m)
	return m
}

func (m *memNumbering) Date(t time.Time) string { return t.In(m.loc).Format("20060102") }
func (m *memNumbering) Width() int              { return m.width }

func (m *memNumbering) Remaining(_ int, _ string, left int64) {
	if left < (m.step+1)/2 {
		m.lows.Add(1)
	}
}

func (m *memNumbering) reserve(date string, shard int) (int64, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := fmt.Sprintf("%s/%d", date, shard)
	m.reserved[k] += m.step
	return m.reserved[k] - m.step, m.reserved[k]
}

// Reserved is the reserved_upto of a shard's day.
func (m *memNumbering) Reserved(date string, shard int) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reserved[fmt.Sprintf("%s/%d", date, shard)]
}

func (m *memNumbering) Supply(ctx context.Context, short *OrderShortage) error {
	m.supplies.Add(1)
	fenceFor := short.Identity // seen before this reservation: see ids.OrderNumbers.raise
	for range 3 {
		old, upto := m.reserve(short.Date, short.Shard)
		_, err := m.store.RaiseOrderCeiling(ctx, short.Shard, short.Date, old, upto, fenceFor)
		var again *OrderShortage
		if !errors.As(err, &again) {
			if fenceFor != "" && err == nil {
				m.fences.Add(1)
			}
			return err
		}
		fenceFor = again.Identity
	}
	return errors.New("memNumbering: redis changed during each fence")
}
