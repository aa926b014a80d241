// Package config reads the daemons' settings from the environment and
// checks every one at start (ranges.go, check.go). Every setting, its
// default and its meaning are listed in the README and in Settings (what -h
// prints; a test holds it to what Load reads); keep the three in step.
package config

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
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
	GrabberAuth     AuthMode
	GrabberAPIToken string
	GrabberMaxConns int    // connections the grabber holds open at once
	AccessLog       bool   // a log line per API request
	MetricsAddr     string // the grabber's /metrics listener; "" serves them on GrabberAddr
	FlusherAddr     string
	FlusherMaxConns int // connections the flusher's operations server holds open at once
	LogLevel        string
	Limits          envelope.Limits
	ShutdownTimeout time.Duration

	IDLocation     *time.Location
	OrderNoWidth   int
	OrderNoSegment int64
	ShortIDMin     int64
	ShortIDMax     int64

	FlushBatchSize     int
	FlushPipeline      int
	FlushWriters       int
	FlushIdleWait      time.Duration
	FlushMaxBackoff    time.Duration
	LoadingRepairAfter time.Duration
	LoadingFailAfter   time.Duration
	SettleEvery        time.Duration
	SettledKeyTTL      time.Duration
	// LedgerRetention is how long after its settlement an envelope is kept
	// before `flusher retention` archives and deletes it; 0 keeps it forever.
	LedgerRetention time.Duration
	// LedgerArchiveDir, when set, makes the flusher daemon run retention
	// itself, archiving into it; "" leaves retention to the command.
	LedgerArchiveDir string

	IdempotencyTTL   time.Duration // how long a create's Idempotency-Key is remembered
	UserGrabRate     int           // grabs a second per user across envelopes; 0: no limit
	UserDailyGrabs   int           // packets a user may receive per day (ID_TIME_ZONE); 0: no limit
	SenderDailyCents int64         // cents a sender may put into envelopes per day; 0: no limit
}

// Load reads the settings through getenv (os.Getenv in production).
func Load(getenv func(string) string) (Config, error) {
	r := reader{getenv: getenv}
	c := Config{
		DatabaseURL:       r.databaseURL("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/redpacket?sslmode=disable"),
		RedisURL:          r.redisURL("REDIS_URL", "redis://127.0.0.1:6379/0"),
		RedisClusterAddrs: r.addrs("REDIS_CLUSTER_ADDRS"),
		RedisKeyPrefix:    r.str("REDIS_KEY_PREFIX", "rp"),
		RedisPoolSize:     r.int("REDIS_POOL_SIZE", 64),
		GrabWorkers:       r.int("GRAB_WORKERS", 4),
		GrabBatchMax:      r.int("GRAB_BATCH_MAX", 64),
		GrabWaitReplicas:  r.count("GRAB_WAIT_REPLICAS", 0),
		GrabWaitTimeout:   r.duration("GRAB_WAIT_TIMEOUT", 100*time.Millisecond),

		GrabberAddr:     r.listenAddr("GRABBER_ADDR", ":8080"),
		GrabberAPIToken: r.token("GRABBER_API_TOKEN"),
		GrabberMaxConns: r.int("GRABBER_MAX_CONNS", 1024),
		AccessLog:       r.onOff("ACCESS_LOG", false),
		MetricsAddr:     r.optionalListenAddr("METRICS_ADDR"),
		FlusherAddr:     r.listenAddr("FLUSHER_ADDR", ":9091"),
		FlusherMaxConns: r.int("FLUSHER_MAX_CONNS", 64),
		LogLevel:        r.logLevel("LOG_LEVEL", "info"),
		Limits: envelope.Limits{
			MaxPackets:     r.int("MAX_PACKETS", 100000),
			MaxTotalCents:  int64(r.int("MAX_TOTAL_CENTS", 100000000)),
			MaxPacketCents: int64(r.int("MAX_PACKET_CENTS", 20000)),
		},
		ShutdownTimeout: r.duration("SHUTDOWN_TIMEOUT", 10*time.Second),

		IDLocation:     r.location("ID_TIME_ZONE", "UTC"),
		OrderNoWidth:   r.int("ORDER_NO_WIDTH", 10),
		OrderNoSegment: int64(r.int("ORDER_NO_SEGMENT", 100000)),
		ShortIDMin:     int64(r.int("SHORT_ID_MIN", 10000000)),
		ShortIDMax:     int64(r.int("SHORT_ID_MAX", 99999999)),

		FlushBatchSize:     r.int("FLUSH_BATCH_SIZE", 2000),
		FlushPipeline:      r.int("FLUSH_PIPELINE", 8),
		FlushWriters:       r.int("FLUSH_WRITERS", 2),
		FlushIdleWait:      r.duration("FLUSH_IDLE_WAIT", 100*time.Millisecond),
		FlushMaxBackoff:    r.duration("FLUSH_MAX_BACKOFF", 5*time.Second),
		LoadingRepairAfter: r.duration("LOADING_REPAIR_AFTER", 30*time.Second),
		LoadingFailAfter:   r.duration("LOADING_FAIL_AFTER", 10*time.Minute),
		SettleEvery:        r.duration("SETTLE_EVERY", time.Second),
		SettledKeyTTL:      r.duration("SETTLED_KEY_TTL", 24*time.Hour),
		LedgerRetention:    r.duration("LEDGER_RETENTION", 0),
		LedgerArchiveDir:   r.str("LEDGER_ARCHIVE_DIR", ""),

		IdempotencyTTL:   r.duration("IDEMPOTENCY_TTL", 24*time.Hour),
		UserGrabRate:     r.count("USER_GRAB_RATE", 0),
		UserDailyGrabs:   r.count("USER_DAILY_GRABS", 0),
		SenderDailyCents: int64(r.count("SENDER_DAILY_CENTS", 0)),
	}
	c.GrabberAuth = r.authMode("GRABBER_AUTH", c.GrabberAPIToken != "")
	r.checkTogether(c)
	return c, errors.Join(r.errs...)
}

// checkTogether refuses settings that are each valid but not together.
func (r *reader) checkTogether(c Config) {
	if c.AccessLog && (c.LogLevel == "warn" || c.LogLevel == "error") {
		r.fail("ACCESS_LOG", "on", "its lines are written at level info, which LOG_LEVEL="+c.LogLevel+" drops; "+
			"set LOG_LEVEL=info (or debug), or ACCESS_LOG=off")
	}
	if c.MetricsAddr != "" && listenersOverlap(c.MetricsAddr, c.GrabberAddr) {
		r.fail("METRICS_ADDR", c.MetricsAddr, fmt.Sprintf("must not listen where GRABBER_ADDR (%q) does: "+
			"another port, or another address on the same port (leave it empty to serve /metrics there)", c.GrabberAddr))
	}
	if strings.ContainsAny(c.RedisKeyPrefix, "{}") || c.RedisKeyPrefix == "" {
		r.fail("REDIS_KEY_PREFIX", c.RedisKeyPrefix, "must be non-empty and hold no braces")
	}
	if c.ShortIDMin > c.ShortIDMax {
		r.fail("SHORT_ID_MIN", strconv.FormatInt(c.ShortIDMin, 10), "must not exceed SHORT_ID_MAX")
	} else if c.ShortIDMax-c.ShortIDMin >= maxShortIDs {
		// The short ids in use are a Redis bitmap over the range.
		r.fail("SHORT_ID_MAX", strconv.FormatInt(c.ShortIDMax, 10),
			fmt.Sprintf("SHORT_ID_MIN..SHORT_ID_MAX may hold at most %d ids", int64(maxShortIDs)))
	}
	if c.LedgerRetention != 0 && c.LedgerRetention < c.SettledKeyTTL {
		// Until then Redis answers repeat grabs of a settled envelope from
		// its claims; afterwards PostgreSQL does, and must still hold them.
		r.fail("LEDGER_RETENTION", r.getenv("LEDGER_RETENTION"), "must be 0 (keep forever) or at least SETTLED_KEY_TTL ("+
			shortDuration(c.SettledKeyTTL)+")")
	}
	switch {
	case c.LedgerArchiveDir != "" && c.LedgerRetention == 0:
		r.fail("LEDGER_ARCHIVE_DIR", c.LedgerArchiveDir, "is for the retention, which LEDGER_RETENTION=0 turns off; "+
			"set LEDGER_RETENTION, or leave LEDGER_ARCHIVE_DIR empty")
	case c.LedgerArchiveDir != "" && !filepath.IsAbs(c.LedgerArchiveDir):
		r.fail("LEDGER_ARCHIVE_DIR", c.LedgerArchiveDir, "must be an absolute path")
	}
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

func (r *reader) int(name string, def int) int { return r.whole(name, def, 1) }

// count reads a whole number that may be 0.
func (r *reader) count(name string, def int) int { return r.whole(name, def, 0) }

// whole reads a whole number in its range of intRanges; a setting without
// one may be any number from lo up.
func (r *reader) whole(name string, def int, lo int64) int {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	b, ok := intRanges[name]
	if !ok {
		b = intRange{lo, math.MaxInt64}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < b.lo || n > b.hi || int64(int(n)) != n {
		r.fail(name, v, fmt.Sprintf("must be a whole number from %d to %d", b.lo, b.hi))
		return def
	}
	return int(n)
}

// duration reads a duration in its range of durationRanges.
func (r *reader) duration(name string, def time.Duration) time.Duration {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	if offWhenZero[name] && v == "0" {
		return 0
	}
	b, ok := durationRanges[name]
	if !ok {
		b = durationRange{time.Nanosecond, math.MaxInt64}
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < b.lo || d > b.hi {
		r.fail(name, v, "must be a duration from "+shortDuration(b.lo)+" to "+shortDuration(b.hi)+
			", such as 250ms, 5s or 2m")
		return def
	}
	return d
}

// location reads an IANA time zone. "Local", which time.LoadLocation takes
// for the process's own zone (TZ, /etc/localtime), is refused: grabbers and
// flushers on hosts set differently would disagree on days.
func (r *reader) location(name, def string) *time.Location {
	v := r.str(name, def)
	loc, err := time.LoadLocation(v)
	if err != nil || loc == time.Local {
		r.fail(name, v, "must be an IANA time zone such as UTC or Asia/Shanghai")
		return time.UTC
	}
	return loc
}
