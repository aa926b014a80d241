package config

import (
	"fmt"
	"io"
)

// Daemon names who reads a setting.
type Daemon int

// The daemons, as a set.
const (
	Grabber Daemon = 1 << iota
	Flusher
	Both = Grabber | Flusher
)

// Setting is one environment variable, for the daemons' -h. The README
// tells more of each; a test holds this list to what Load and LoadEvents
// read and to their defaults.
type Setting struct {
	Name    string
	Default string // as it would be written in the environment; "" for unset
	Help    string
	Used    Daemon
}

// Settings are every setting, in the README's order.
var Settings = []Setting{
	{"DATABASE_URL", "postgres://postgres@127.0.0.1:5432/redpacket?sslmode=disable", "PostgreSQL", Both},
	{"REDIS_URL", "redis://127.0.0.1:6379/0", "one Redis (ignored with REDIS_CLUSTER_ADDRS)", Both},
	{"REDIS_CLUSTER_ADDRS", "", "comma-separated Redis Cluster seed nodes, host:port", Both},
	{"REDIS_KEY_PREFIX", "rp", "prefix inside every key's hash tag (no braces)", Both},
	{"REDIS_POOL_SIZE", "64", "Redis connections per process (and Cluster node)", Both},
	{"GRAB_WORKERS", "4", "pipelines of coalesced grabs in flight at once", Grabber},
	{"GRAB_BATCH_MAX", "64", "most grabs sent together", Grabber},
	{"GRAB_WAIT_REPLICAS", "0", "replicas that must hold a grab before it is answered and written", Both},
	{"GRAB_WAIT_TIMEOUT", "100ms", "how long grabs wait for those replicas", Both},
	{"GRABBER_ADDR", ":8080", "grabber listen address", Grabber},
	{"GRABBER_AUTH", "", "none, token or keys: how /v1/ requests are authenticated; default token when GRABBER_API_TOKEN is set, else none", Grabber},
	{"GRABBER_API_TOKEN", "", "with GRABBER_AUTH=token, /v1/ requests need Authorization: Bearer <token>", Grabber},
	{"ACCESS_LOG", "off", "on: a log line per API request (method, route, status, duration, client, request id)", Grabber},
	{"METRICS_ADDR", "", "when set, /metrics is served on this address instead of GRABBER_ADDR", Grabber},
	{"GRABBER_MAX_CONNS", "1024", "connections the grabber holds open at once", Grabber},
	{"FLUSHER_ADDR", ":9091", "flusher's /healthz, /readyz and /metrics", Flusher},
	{"FLUSHER_MAX_CONNS", "64", "connections the flusher's server holds open at once", Flusher},
	{"LOG_LEVEL", "info", "debug, info, warn or error", Both},
	{"MAX_PACKETS", "100000", "most packets per envelope", Grabber},
	{"MAX_TOTAL_CENTS", "100000000", "largest envelope total", Grabber},
	{"MAX_PACKET_CENTS", "20000", "largest packet of any split", Grabber},
	{"SHUTDOWN_TIMEOUT", "10s", "how long a shutdown may take in all: work in hand, then closing", Both},
	{"ID_TIME_ZONE", "UTC", "time zone of the dates in order numbers and share codes, and of flusher export's days", Both},
	{"ORDER_NO_WIDTH", "10", "digits of the per-day sequence in an order number", Grabber},
	{"ORDER_NO_SEGMENT", "100000", "order numbers of a shard reserved in PostgreSQL at a time", Grabber},
	{"IDEMPOTENCY_TTL", "24h", "how long a create's Idempotency-Key is remembered", Grabber},
	{"USER_GRAB_RATE", "0", "grabs a second one user may make across envelopes; 0: no limit", Grabber},
	{"USER_DAILY_GRABS", "0", "packets one user may receive a day (ID_TIME_ZONE); 0: no limit", Grabber},
	{"SENDER_DAILY_CENTS", "0", "cents one sender may put into envelopes a day (ID_TIME_ZONE); 0: no limit", Grabber},
	{"SHORT_ID_MIN", "10000000", "lowest short user id", Grabber},
	{"SHORT_ID_MAX", "99999999", "highest short user id; at most 2^32 ids in the range", Grabber},
	{"FLUSH_BATCH_SIZE", "2000", "claims per flusher transaction", Flusher},
	{"FLUSH_PIPELINE", "8", "transactions of FLUSH_BATCH_SIZE a batch taken from a shard holds", Flusher},
	{"FLUSH_WRITERS", "2", "transactions of a batch open at once: one commits while the others COPY; each a PostgreSQL connection", Flusher},
	{"FLUSH_IDLE_WAIT", "100ms", "pause when every queue is empty", Flusher},
	{"FLUSH_MAX_BACKOFF", "5s", "longest pause between retries", Flusher},
	{"LOADING_REPAIR_AFTER", "30s", "age at which a half-loaded envelope is finished", Flusher},
	{"LOADING_FAIL_AFTER", "10m", "age at which an envelope still loading is given up", Flusher},
	{"SETTLE_EVERY", "1s", "how often envelopes are checked for settlement", Flusher},
	{"SETTLED_KEY_TTL", "24h", "how long a settled envelope's Redis keys stay", Flusher},
	{"WEBHOOK_URL", "", "when set, every event is POSTed there, signed", Flusher},
	{"WEBHOOK_SECRET", "", "key of the webhook signatures: whsec_ and the base64 of 24-64 random bytes; two, space-separated, while rotating", Flusher},
	{"WEBHOOK_TIMEOUT", "5s", "how long a webhook request may take", Flusher},
	{"WEBHOOK_MAX_BACKOFF", "5m", "longest pause before an event is tried again", Flusher},
	{"WEBHOOK_WORKERS", "4", "webhook requests in flight at once", Flusher},
	{"EVENTS_RETENTION", "168h", "age past which events are deleted", Flusher},
	{"LEDGER_RETENTION", "0", "age past settlement at which flusher retention archives and deletes an envelope; 0: keep forever", Flusher},
	{"LEDGER_ARCHIVE_DIR", "", "when set (with LEDGER_RETENTION), the flusher runs retention hourly, archiving there", Flusher},
}

// WriteSettings writes the settings d reads: each one's name and default,
// then what it is.
func WriteSettings(w io.Writer, d Daemon) error {
	for _, s := range Settings {
		if s.Used&d == 0 {
			continue
		}
		def := "(unset)"
		if s.Default != "" {
			def = "(default " + s.Default + ")"
		}
		if _, err := fmt.Fprintf(w, "  %s %s\n        %s%s\n", s.Name, def, s.Help, rangeOf(s.Name)); err != nil {
			return err
		}
	}
	return nil
}

// rangeOf is ", lo-hi" for a setting with a range, else "".
func rangeOf(name string) string {
	if b, ok := intRanges[name]; ok {
		return fmt.Sprintf(", %d-%d", b.lo, b.hi)
	}
	if b, ok := durationRanges[name]; ok {
		return ", " + shortDuration(b.lo) + "-" + shortDuration(b.hi)
	}
	return ""
}
