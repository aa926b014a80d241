package ids

import (
	"testing"
	"time"
)

// A day begins at its first instant whose local date is that day, also
// where the clocks skip midnight, and ends where the next one begins.
func TestDayStart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		zone      string
		y         int
		m         time.Month
		d         int
		wantStart string // UTC
		hours     float64
	}{
		{"UTC", 2024, 12, 31, "2024-12-31T00:00:00Z", 24},
		{"Asia/Shanghai", 2024, 3, 10, "2024-03-09T16:00:00Z", 24},
		{"America/New_York", 2026, 3, 8, "2026-03-08T05:00:00Z", 23},
		{"America/New_York", 2026, 11, 1, "2026-11-01T04:00:00Z", 25},
		{"America/Havana", 2024, 3, 10, "2024-03-10T05:00:00Z", 23},  // 00:00 does not exist
		{"America/Santiago", 2024, 9, 8, "2024-09-08T04:00:00Z", 23}, // nor here
		{"America/Santiago", 2024, 9, 7, "2024-09-07T04:00:00Z", 24}, // the day before ends at the change
		{"America/Santiago", 2025, 4, 5, "2025-04-05T03:00:00Z", 25}, // 23:00-24:00 twice
	} {
		loc, err := time.LoadLocation(c.zone)
		if err != nil {
			t.Fatal(err)
		}
		start, next := DayStart(c.y, c.m, c.d, loc), DayStart(c.y, c.m, c.d+1, loc)
		if got := start.UTC().Format(time.RFC3339); got != c.wantStart {
			t.Errorf("%s %d-%02d-%02d starts %s, want %s", c.zone, c.y, c.m, c.d, got, c.wantStart)
		}
		if h := next.Sub(start).Hours(); h != c.hours {
			t.Errorf("%s %d-%02d-%02d lasts %v hours, want %v", c.zone, c.y, c.m, c.d, h, c.hours)
		}
		if got := start.In(loc).Format("2006-01-02"); got != time.Date(c.y, c.m, c.d, 0, 0, 0, 0, time.UTC).Format("2006-01-02") {
			t.Errorf("%s: start %s is on %s", c.zone, start, got)
		}
		if got := start.Add(-time.Millisecond).In(loc).Format("2006-01-02"); got == start.In(loc).Format("2006-01-02") {
			t.Errorf("%s: a millisecond before %s is the same day", c.zone, start)
		}
	}
}
