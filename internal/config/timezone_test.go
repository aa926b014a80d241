package config

import (
	"strings"
	"testing"
	"time"
)

// ID_TIME_ZONE=Local would give each process its host's zone, so grabbers
// and flushers could disagree on a day: it is refused like any name that is
// not an IANA zone. Unset, it is UTC; an IANA name is taken.
func TestTimeZoneNotLocal(t *testing.T) {
	_, err := Load(env(map[string]string{"ID_TIME_ZONE": "Local"}))
	if err == nil || !strings.Contains(err.Error(), "ID_TIME_ZONE=") ||
		!strings.Contains(err.Error(), "must be an IANA time zone") {
		t.Fatalf("ID_TIME_ZONE=Local: %v; want it refused as not an IANA time zone", err)
	}
	for v, want := range map[string]string{"": "UTC", "UTC": "UTC", "Asia/Shanghai": "Asia/Shanghai"} {
		c, err := Load(env(map[string]string{"ID_TIME_ZONE": v}))
		if err != nil || c.IDLocation.String() != want || c.IDLocation == time.Local {
			t.Errorf("ID_TIME_ZONE=%q: %v, %v; want %s", v, c.IDLocation, err, want)
		}
	}
}
