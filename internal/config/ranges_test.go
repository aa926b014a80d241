package config

import (
	"encoding/base64"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// loadAll reads both sets of settings, as the flusher does.
func loadAll(vars map[string]string) error {
	_, err := Load(env(vars))
	_, evErr := LoadEvents(env(vars))
	if err == nil {
		return evErr
	}
	if evErr != nil {
		return errEach{err, evErr}
	}
	return err
}

type errEach [2]error

func (e errEach) Error() string { return e[0].Error() + "\n" + e[1].Error() }

// Every numeric setting takes the ends of its range and refuses a value
// just outside, with a message naming the variable.
func TestRanges(t *testing.T) {
	for name, b := range intRanges {
		for _, v := range []int64{b.lo, b.hi} {
			vars := map[string]string{name: strconv.FormatInt(v, 10)}
			if strings.HasPrefix(name, "SHORT_ID_") { // the other end follows, within the bitmap's range
				vars["SHORT_ID_MIN"], vars["SHORT_ID_MAX"] = strconv.FormatInt(v, 10), strconv.FormatInt(v, 10)
			}
			if err := loadAll(vars); err != nil {
				t.Errorf("%s=%d (in range): %v", name, v, err)
			}
		}
		for _, v := range []string{strconv.FormatInt(b.lo-1, 10), strconv.FormatInt(b.hi+1, 10), "1.5", "0x10", " 5", "many"} {
			err := loadAll(map[string]string{name: v})
			if err == nil || !strings.Contains(err.Error(), name+"=") {
				t.Errorf("%s=%s: error %v, want one naming %s", name, v, err, name)
			}
		}
	}
	for name, b := range durationRanges {
		for _, d := range []time.Duration{b.lo, b.hi} {
			// LEDGER_RETENTION may not be below SETTLED_KEY_TTL (TestLedgerRetention).
			if err := loadAll(map[string]string{name: d.String(), "SETTLED_KEY_TTL": "1s"}); err != nil {
				t.Errorf("%s=%s (in range): %v", name, d, err)
			}
		}
		bad := []string{(b.lo - time.Nanosecond).String(), (b.hi + time.Nanosecond).String(), "-1s", "soon", "5"}
		if !offWhenZero[name] {
			bad = append(bad, "0")
		}
		for _, v := range bad {
			err := loadAll(map[string]string{name: v})
			if err == nil || !strings.Contains(err.Error(), name+"=") {
				t.Errorf("%s=%s: error %v, want one naming %s", name, v, err, name)
			}
		}
	}
}

// A short-id range too large for its bitmap is refused at start (it made
// the grabber panic once connected).
func TestShortIDRange(t *testing.T) {
	_, err := Load(env(map[string]string{"SHORT_ID_MIN": "1", "SHORT_ID_MAX": "9999999999"}))
	if err == nil || !strings.Contains(err.Error(), "SHORT_ID_MAX=") {
		t.Errorf("SHORT_ID_MIN=1 SHORT_ID_MAX=9999999999: error %v, want one naming SHORT_ID_MAX", err)
	}
	c, err := Load(env(map[string]string{"SHORT_ID_MIN": "0", "SHORT_ID_MAX": "4294967295"}))
	if err != nil || c.ShortIDMin != 0 || c.ShortIDMax != 4294967295 {
		t.Errorf("the largest range: %v, %d..%d", err, c.ShortIDMin, c.ShortIDMax)
	}
	if _, err := Load(env(map[string]string{"SHORT_ID_MIN": "0", "SHORT_ID_MAX": "4294967296"})); err == nil {
		t.Error("a range of 2^32 + 1 ids was accepted")
	}
}

func TestShapes(t *testing.T) {
	for name, vars := range map[string]map[string]string{
		"GRABBER_ADDR=":        {"GRABBER_ADDR": "8080"},
		"FLUSHER_ADDR=":        {"FLUSHER_ADDR": ":99999"},
		"REDIS_CLUSTER_ADDRS=": {"REDIS_CLUSTER_ADDRS": "127.0.0.1:7101,127.0.0.1"},
		"LOG_LEVEL=":           {"LOG_LEVEL": "verbose"},
		"REDIS_URL=":           {"REDIS_URL": "http://127.0.0.1:6379/0"},
		"DATABASE_URL=":        {"DATABASE_URL": "mysql://u@h/db"},
		"GRABBER_API_TOKEN":    {"GRABBER_API_TOKEN": "two words"},
	} {
		if _, err := Load(env(vars)); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%v: error %v, want one naming %s", vars, err, name)
		}
	}
	// REDIS_URL is not used with a cluster, so not checked.
	if _, err := Load(env(map[string]string{"REDIS_CLUSTER_ADDRS": "h:1", "REDIS_URL": "nonsense"})); err != nil {
		t.Errorf("a cluster and an unused REDIS_URL: %v", err)
	}
}

// No secret appears in a message: not a token, not a password in a URL, not
// a query value of the webhook's URL.
func TestSecretsNotShown(t *testing.T) {
	const secret = "hunter2x"
	for _, vars := range []map[string]string{
		{"DATABASE_URL": "postgres://u:hun ter2x@h/db"},
		{"DATABASE_URL": "postgres://u:" + secret + "@h/db?sslmode=bogus"},
		{"DATABASE_URL": "postgres://u@h/db?password=" + secret + "&sslmode=bogus"},
		{"DATABASE_URL": "postgres://u:" + secret + "@h:99999999/db"},
		{"DATABASE_URL": "mysql://u:" + secret + "@h/db"},
		{"REDIS_URL": "redis://:hun ter2x@h:6379/0"},
		{"REDIS_URL": "redis://:" + secret + "@h:6379/zz"},
		{"REDIS_URL": "redis://:" + secret + "@h:6379/0?foo=bar"},
		{"REDIS_URL": "redis://:" + secret + "@h:99999/0"},
		{"WEBHOOK_URL": "ftp://u:" + secret + "@h/x", "WEBHOOK_SECRET": "0123456789abcdef"},
		{"WEBHOOK_URL": "ftp://h/x?token=" + secret, "WEBHOOK_SECRET": "0123456789abcdef"},
		{"WEBHOOK_URL": "ftp://" + secret + "@h/x", "WEBHOOK_SECRET": "0123456789abcdef"},
		{"WEBHOOK_URL": "https://u:" + secret + "@h/x", "WEBHOOK_SECRET": "short"},
		{"GRABBER_API_TOKEN": "hunter2x token"},
		{"WEBHOOK_URL": "http://h/x", "WEBHOOK_SECRET": secret},
	} {
		err := loadAll(vars)
		if err == nil {
			t.Errorf("%v: no error", vars)
			continue
		}
		for _, s := range []string{secret, "hun ter2x", "hun%20ter2x"} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("the error repeats a secret: %v", err)
			}
		}
	}
}

// The settings the daemons' -h lists are those Load and LoadEvents read,
// with their defaults.
func TestSettingsList(t *testing.T) {
	read := map[string]bool{}
	// A webhook URL, so that the secret that goes with it is read too.
	record := func(k string) string {
		read[k] = true
		switch k {
		case "WEBHOOK_URL":
			return "https://hooks.example/redpacket"
		case "WEBHOOK_SECRET":
			return "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32))
		}
		return ""
	}
	if _, err := Load(record); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadEvents(record); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, s := range Settings {
		listed[s.Name] = true
		if !read[s.Name] {
			t.Errorf("%s is listed but not read", s.Name)
		}
	}
	for name := range read {
		if !listed[name] {
			t.Errorf("%s is read but not listed", name)
		}
	}
	defaults, err := Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	evDefaults, _ := LoadEvents(env(nil))
	for _, s := range Settings {
		if s.Default == "" {
			continue
		}
		c, err := Load(env(map[string]string{s.Name: s.Default}))
		ev, evErr := LoadEvents(env(map[string]string{s.Name: s.Default}))
		if err != nil || evErr != nil || c.IDLocation.String() != defaults.IDLocation.String() {
			t.Errorf("%s=%s: %v %v", s.Name, s.Default, err, evErr)
			continue
		}
		c.IDLocation = defaults.IDLocation
		if !reflect.DeepEqual(c, defaults) || !reflect.DeepEqual(ev, evDefaults) {
			t.Errorf("%s: the listed default %q is not the default", s.Name, s.Default)
		}
	}
}
