package config

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.GrabberAddr != ":8080" || c.FlusherAddr != ":9091" || c.RedisKeyPrefix != "rp" ||
		c.Limits.MaxPackets != 100000 || c.Limits.MaxTotalCents != 100000000 ||
		c.FlushBatchSize != 2000 || c.FlushIdleWait != 100*time.Millisecond ||
		c.IDLocation != time.UTC || c.OrderNoWidth != 10 || c.ShortIDMin != 10000000 || c.ShortIDMax != 99999999 {
		t.Errorf("defaults: %+v", c)
	}
}

// The largest total every script adds up exactly is accepted, one more is not
// (TestBadValues); 1e17, which broke the grab script, is refused.
func TestMaxTotalCentsBound(t *testing.T) {
	c, err := Load(env(map[string]string{"MAX_TOTAL_CENTS": "9007199254740991"}))
	if err != nil || c.Limits.MaxTotalCents != 1<<53-1 {
		t.Errorf("MAX_TOTAL_CENTS=2^53-1: %+v, %v", c.Limits, err)
	}
	if _, err := Load(env(map[string]string{"MAX_TOTAL_CENTS": "100000000000000000"})); err == nil ||
		!strings.Contains(err.Error(), "MAX_TOTAL_CENTS=") {
		t.Errorf("MAX_TOTAL_CENTS=1e17: %v, want an error naming it", err)
	}
}

func TestOverrides(t *testing.T) {
	c, err := Load(env(map[string]string{
		"REDIS_CLUSTER_ADDRS": " a:1, b:2 ,", "FLUSH_IDLE_WAIT": "250ms", "MAX_PACKETS": "7",
		"ID_TIME_ZONE": "Asia/Shanghai", "GRABBER_API_TOKEN": "t",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.RedisClusterAddrs) != 2 || c.RedisClusterAddrs[1] != "b:2" || c.FlushIdleWait != 250*time.Millisecond ||
		c.Limits.MaxPackets != 7 || c.IDLocation.String() != "Asia/Shanghai" || c.GrabberAPIToken != "t" {
		t.Errorf("overrides: %+v", c)
	}
}

// Every bad value is reported, each naming its variable.
func TestBadValues(t *testing.T) {
	bad := map[string]string{
		"FLUSH_BATCH_SIZE": "0", "MAX_PACKETS": "many", "FLUSH_IDLE_WAIT": "soon",
		"ID_TIME_ZONE": "Mars/Olympus", "REDIS_KEY_PREFIX": "a{b}", "ORDER_NO_WIDTH": "19",
		"SHORT_ID_MIN": "50", "SHORT_ID_MAX": "10", "MAX_TOTAL_CENTS": "9007199254740992",
	}
	_, err := Load(env(bad))
	if err == nil {
		t.Fatal("no error")
	}
	for name := range bad {
		if name == "SHORT_ID_MAX" {
			continue // reported under SHORT_ID_MIN
		}
		if !strings.Contains(err.Error(), name+"=") {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

// LEDGER_RETENTION is off by default and at 0, and never shorter than
// SETTLED_KEY_TTL: until then Redis answers repeats from a settled
// envelope's claims, and afterwards PostgreSQL must still hold them.
func TestLedgerRetention(t *testing.T) {
	for _, v := range []string{"", "0"} {
		if c, err := Load(env(map[string]string{"LEDGER_RETENTION": v})); err != nil || c.LedgerRetention != 0 {
			t.Errorf("LEDGER_RETENTION=%q: %v, %v; want 0 (keep forever)", v, c.LedgerRetention, err)
		}
	}
	c, err := Load(env(map[string]string{"LEDGER_RETENTION": "24h"}))
	if err != nil || c.LedgerRetention != 24*time.Hour {
		t.Errorf("LEDGER_RETENTION=24h, the default SETTLED_KEY_TTL: %v, %v", c.LedgerRetention, err)
	}
	for vars, want := range map[[2]string]bool{
		{"23h", "24h"}: false, {"1h", "1h"}: true, {"720h", "168h"}: true, {"1h", "2h"}: false,
	} {
		_, err := Load(env(map[string]string{"LEDGER_RETENTION": vars[0], "SETTLED_KEY_TTL": vars[1]}))
		if ok := err == nil; ok != want || (!ok && !strings.Contains(err.Error(), "LEDGER_RETENTION=")) {
			t.Errorf("LEDGER_RETENTION=%s SETTLED_KEY_TTL=%s: %v, want accepted %v", vars[0], vars[1], err, want)
		}
	}
}

// LEDGER_ARCHIVE_DIR turns the daemon's retention on: it needs a retention
// and an absolute path.
func TestLedgerArchiveDir(t *testing.T) {
	for vars, want := range map[[2]string]bool{
		{"/srv/archive", "48h"}: true, {"/srv/archive", "0"}: false, {"/srv/archive", ""}: false,
		{"archive", "48h"}: false, {"", "48h"}: true,
	} {
		c, err := Load(env(map[string]string{"LEDGER_ARCHIVE_DIR": vars[0], "LEDGER_RETENTION": vars[1]}))
		if ok := err == nil; ok != want || (!ok && !strings.Contains(err.Error(), "LEDGER_ARCHIVE_DIR=")) ||
			(ok && c.LedgerArchiveDir != vars[0]) {
			t.Errorf("LEDGER_ARCHIVE_DIR=%q LEDGER_RETENTION=%q: %q, %v; want accepted %v", vars[0], vars[1], c.LedgerArchiveDir, err, want)
		}
	}
}
