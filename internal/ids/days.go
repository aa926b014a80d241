package ids

import "time"

// DayStart is the first instant of the day y-m-d (normalised, as time.Date
// does) in loc. Where a zone's clocks skip midnight (America/Havana and
// America/Santiago on the day summer time begins), local 00:00 does not
// exist and time.Date may answer an instant of the day before; the day then
// begins at the change.
func DayStart(y int, m time.Month, d int, loc *time.Location) time.Time {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	wy, wm, wd := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Date()
	for range 2 {
		if ly, lm, ld := t.In(loc).Date(); ly == wy && lm == wm && ld == wd {
			return t
		}
		_, end := t.ZoneBounds()
		if !end.After(t) {
			break
		}
		t = end
	}
	return t
}
