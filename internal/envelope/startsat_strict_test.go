package envelope

import (
	"testing"
	"time"
)

// starts_at is RFC 3339 and nothing else: spellings Go's time.Parse would
// also take (a comma for the point, more digits than a nanosecond, a
// 24-hour or 60-minute offset) are 400 invalid_argument naming the field,
// as are lowercase t and z, which the API does not write.
func TestStartsAtOnlyRFC3339(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	check := func(s string) (Checked, error) {
		return DefaultLimits().Check(CreateRequest{SenderID: "s", TotalCents: 3, Count: 3, StartsAt: s}, now)
	}
	for s, want := range map[string]time.Time{
		"2026-11-21T19:00:00.5+08:00":         now.Add(time.Hour + 500*time.Millisecond),
		"2026-11-21T11:00:00.123456789Z":      now.Add(time.Hour + 123*time.Millisecond),
		"2026-11-21T11:00:00-00:00":           now.Add(time.Hour),
		"2026-11-22T10:59:00+23:59":           now.Add(time.Hour),
		"2026-11-20T11:01:00-23:59":           now.Add(time.Hour),
		"2026-11-21T11:00:00.000000000+00:00": now.Add(time.Hour),
	} {
		if c, err := check(s); err != nil || !c.StartsAt.Equal(want) {
			t.Errorf("starts_at %q: %v, %v; want %v", s, c.StartsAt, err, want)
		}
	}
	for _, s := range []string{
		"2026-11-22T10:00:00+24:00", "2026-11-21T11:00:00-24:00", "2026-11-21T11:00:00+08:60",
		"2026-11-21T11:00:00,5Z", "2026-11-21T11:00:00.1234567891Z", "2026-11-21T11:00:00.Z",
		"2026-11-21t11:00:00Z", "2026-11-21T11:00:00z", "2026-11-21T11:00:00+0800",
		"2026-11-21T11:00Z", "2026-11-21T11:00:00", " 2026-11-21T11:00:00Z", "2026-11-21T11:00:00Z\n",
		"2026-11-21T24:00:00Z", "2026-11-31T11:00:00Z", "+2026-11-21T11:00:00Z",
	} {
		if c, err := check(s); err == nil {
			t.Errorf("starts_at %q accepted as %v", s, c.StartsAt)
		} else {
			checkFieldError(t, err, "starts_at")
		}
	}
}
