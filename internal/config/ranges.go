package config

import (
	"strings"
	"time"
)

// The ranges of the numeric settings, checked at start: a value outside is
// a message naming the variable (and exit status 2), never a failure or a
// panic later. A whole-number setting not listed may be any positive number
// (0 too for those read as counts); a duration not listed, any positive one.
// The README gives each range.

type intRange struct{ lo, hi int64 }

var intRanges = map[string]intRange{
	"REDIS_POOL_SIZE":    {1, 10_000},
	"GRAB_WORKERS":       {1, 1_024},
	"GRAB_BATCH_MAX":     {1, 1_000}, // the grab script unpacks a call's users onto the Lua stack
	"GRAB_WAIT_REPLICAS": {0, 100},
	"GRABBER_MAX_CONNS":  {1, 1_000_000},
	"FLUSHER_MAX_CONNS":  {1, 10_000},
	"MAX_TOTAL_CENTS":    {1, maxJSONInt}, // the Redis scripts add cents up exactly only below 2^53
	"MAX_PACKET_CENTS":   {1, maxJSONInt},
	"MAX_PACKETS":        {1, 1_000_000}, // every packet is written in the create's one transaction and one load
	"ORDER_NO_WIDTH":     {1, 18},        // yyyyMMdd + the sequence stays within 26 digits; the sequence within int64
	"ORDER_NO_SEGMENT":   {1, 1_000_000},
	"SHORT_ID_MIN":       {0, maxJSONInt}, // short ids are JSON numbers: exact below 2^53
	"SHORT_ID_MAX":       {0, maxJSONInt},
	"FLUSH_BATCH_SIZE":   {1, 100_000},
	"FLUSH_PIPELINE":     {1, 16},
	"FLUSH_WRITERS":      {1, 16}, // each a connection of the pool while a batch is written
	"WEBHOOK_WORKERS":    {1, 64},
	"USER_GRAB_RATE":     {0, 1_000_000}, // also the bucket's size: a second's grabs at once
	"USER_DAILY_GRABS":   {0, 1_000_000_000},
	"SENDER_DAILY_CENTS": {0, maxJSONInt}, // the Redis counter adds cents up exactly only below 2^53
}

// maxJSONInt is the largest integer every JSON reader holds exactly.
const maxJSONInt = 1<<53 - 1

// maxShortIDs is the most short ids a range may hold: the bitmap of those in
// use is one Redis string (512 MB).
const maxShortIDs = 1 << 32

type durationRange struct{ lo, hi time.Duration }

const day = 24 * time.Hour

var durationRanges = map[string]durationRange{
	"GRAB_WAIT_TIMEOUT":    {time.Millisecond, 5 * time.Second}, // within the 10 s a pipeline of grabs may take
	"SHUTDOWN_TIMEOUT":     {time.Millisecond, time.Hour},
	"FLUSH_IDLE_WAIT":      {time.Millisecond, time.Minute},
	"FLUSH_MAX_BACKOFF":    {time.Millisecond, time.Hour},
	"LOADING_REPAIR_AFTER": {time.Millisecond, 7 * day},
	"LOADING_FAIL_AFTER":   {time.Millisecond, 7 * day},
	"SETTLE_EVERY":         {time.Millisecond, time.Hour},
	"SETTLED_KEY_TTL":      {time.Second, 365 * day}, // a Redis expiry in whole seconds or more
	"WEBHOOK_TIMEOUT":      {time.Millisecond, 10 * time.Minute},
	"WEBHOOK_MAX_BACKOFF":  {time.Millisecond, 7 * day},
	"EVENTS_RETENTION":     {time.Minute, 100 * 365 * day},
	"IDEMPOTENCY_TTL":      {time.Minute, 30 * day},
	"LEDGER_RETENTION":     {time.Second, 100 * 365 * day}, // or 0: keep forever; never below SETTLED_KEY_TTL (config.go)
}

// offWhenZero are the durations for which 0 means "off" rather than a
// value out of range.
var offWhenZero = map[string]bool{"LEDGER_RETENTION": true}

// shortDuration writes d as the README does: 5s, 2m, 168h.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
