package redisstore

import "time"

// MemNumbering is memNumbering for the external tests.
type MemNumbering = memNumbering

// NumberInMemory makes s number its grants from reservations kept in
// memory: width digits, step numbers a reservation, days in loc.
func NumberInMemory(s *Store, width int, step int64, loc *time.Location) *MemNumbering {
	return newMemNumbering(s, width, step, loc)
}

// Supplies, Fences and Lows count the numbering's raises, fences and
// low-numbers signals.
func (m *MemNumbering) Supplies() int64 { return m.supplies.Load() }
func (m *MemNumbering) Fences() int64   { return m.fences.Load() }
func (m *MemNumbering) Lows() int64     { return m.lows.Load() }
