// Package config reads the daemons' settings from the environment. Every
// setting, its default and its meaning are listed in the README; keep the
// two in step.
package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"redpacket/internal/envelope"
)

// Config holds the settings of both daemons.
type Config struct {
	DatabaseURL       string
	RedisURL          string
	RedisClusterAddrs []string
	RedisKeyPrefix    string
	RedisPoolSize     int
	GrabWorkers       int // pipelines of coalesced grabs in flight at once
	GrabBatchMax      int // most grabs sent in one pipeline
	GrabWaitReplicas  int // replicas that must hold a grab before it is answered (0: no wait)
	GrabWaitTimeout   time.Duration

	GrabberAddr     string
	GrabberAPIToken string
	FlusherAddr     string
	LogLevel        string
	Limits          envelope.Limits
	ShutdownTimeout time.Duration

	IDLocation     *time.Location
	OrderNoWidth   int
	OrderNoSegment int64
	ShortIDMin     int64
	ShortIDMax     int64

	FlushBatchSize     int
	FlushIdleWait      time.Duration
	FlushMaxBackoff    time.Duration
	LoadingRepairAfter time.Duration
	LoadingFailAfter   time.Duration
	SettleEvery        time.Duration
	SettledKeyTTL      time.Duration
}

// Load reads the settings through getenv (os.Getenv in production).
func Load(getenv func(string) string) (Config, error) {
	r := reader{getenv: getenv}
	c := Config{
		DatabaseURL:       r.str("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/redpacket?sslmode=disable"),
		RedisURL:          r.str("REDIS_URL", "redis://127.0.0.1:6379/0"),
		RedisClusterAddrs: r.list("REDIS_CLUSTER_ADDRS"),
		RedisKeyPrefix:    r.str("REDIS_KEY_PREFIX", "rp"),
		RedisPoolSize:     r.int("REDIS_POOL_SIZE", 64),
		GrabWorkers:       r.int("GRAB_WORKERS", 4),
		GrabBatchMax:      r.int("GRAB_BATCH_MAX", 64),
		GrabWaitReplicas:  r.count("GRAB_WAIT_REPLICAS", 0),
		GrabWaitTimeout:   r.duration("GRAB_WAIT_TIMEOUT", 100*time.Millisecond),

		GrabberAddr:     r.str("GRABBER_ADDR", ":8080"),
		GrabberAPIToken: r.str("GRABBER_API_TOKEN", ""),
		FlusherAddr:     r.str("FLUSHER_ADDR", ":9091"),
		LogLevel:        r.str("LOG_LEVEL", "info"),
		Limits: envelope.Limits{
			MaxPackets:    r.int("MAX_PACKETS", 100000),
			MaxTotalCents: int64(r.int("MAX_TOTAL_CENTS", 100000000)),
		},
		ShutdownTimeout: r.duration("SHUTDOWN_TIMEOUT", 10*time.Second),

		IDLocation:     r.location("ID_TIME_ZONE", "UTC"),
		OrderNoWidth:   r.int("ORDER_NO_WIDTH", 10),
		OrderNoSegment: int64(r.int("ORDER_NO_SEGMENT", 1000)),
		ShortIDMin:     int64(r.int("SHORT_ID_MIN", 10000000)),
		ShortIDMax:     int64(r.int("SHORT_ID_MAX", 99999999)),

		FlushBatchSize:     r.int("FLUSH_BATCH_SIZE", 2000),
		FlushIdleWait:      r.duration("FLUSH_IDLE_WAIT", 100*time.Millisecond),
		FlushMaxBackoff:    r.duration("FLUSH_MAX_BACKOFF", 5*time.Second),
		LoadingRepairAfter: r.duration("LOADING_REPAIR_AFTER", 30*time.Second),
		LoadingFailAfter:   r.duration("LOADING_FAIL_AFTER", 10*time.Minute),
		SettleEvery:        r.duration("SETTLE_EVERY", time.Second),
		SettledKeyTTL:      r.duration("SETTLED_KEY_TTL", 24*time.Hour),
	}
	if strings.ContainsAny(c.RedisKeyPrefix, "{}") || c.RedisKeyPrefix == "" {
		r.fail("REDIS_KEY_PREFIX", c.RedisKeyPrefix, "must be non-empty and hold no braces")
	}
	if c.OrderNoWidth > 18 {
		r.fail("ORDER_NO_WIDTH", strconv.Itoa(c.OrderNoWidth), "must be between 1 and 18")
	}
	if c.GrabBatchMax > 1000 {
		// The grab script unpacks a call's users onto the Lua stack.
		r.fail("GRAB_BATCH_MAX", strconv.Itoa(c.GrabBatchMax), "must be between 1 and 1000")
	}
	if c.ShortIDMin > c.ShortIDMax {
		r.fail("SHORT_ID_MIN", strconv.FormatInt(c.ShortIDMin, 10), "must not exceed SHORT_ID_MAX")
	}
	return c, errors.Join(r.errs...)
}

type reader struct {
	getenv func(string) string
	errs   []error
}

func (r *reader) fail(name, val, why string) {
	r.errs = append(r.errs, fmt.Errorf("%s=%q: %s", name, val, why))
}

func (r *reader) str(name, def string) string {
	if v := r.getenv(name); v != "" {
		return v
	}
	return def
}

func (r *reader) list(name string) []string {
	var out []string
	for _, s := range strings.Split(r.getenv(name), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (r *reader) int(name string, def int) int {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		r.fail(name, v, "must be a positive integer")
		return def
	}
	return n
}

// count reads a whole number that may be 0.
func (r *reader) count(name string, def int) int {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		r.fail(name, v, "must be 0 or a positive integer")
		return def
	}
	return n
}

func (r *reader) duration(name string, def time.Duration) time.Duration {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		r.fail(name, v, "must be a positive duration such as 250ms or 5s")
		return def
	}
	return d
}

func (r *reader) location(name, def string) *time.Location {
	v := r.str(name, def)
	loc, err := time.LoadLocation(v)
	if err != nil {
		r.fail(name, v, "must be an IANA time zone such as UTC or Asia/Shanghai")
		return time.UTC
	}
	return loc
}
