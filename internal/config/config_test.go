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
		"SHORT_ID_MIN": "50", "SHORT_ID_MAX": "10",
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
