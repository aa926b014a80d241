// Package dburl reads DATABASE_URL for the connections the daemons open
// outside their pool (shard leases, the events listener, migrations), and
// holds what every connection of theirs needs (Writable).
package dburl

import (
	"net/url"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Session is databaseURL without the pool's settings (pool_max_conns and
// the other pool_* parameters, which pgxpool reads and removes). A
// connection of its own would send them to the server as run-time
// parameters, and the server refuses a parameter it does not know, so a
// URL that sizes the pool would keep the leases, the listener and the
// migrations from connecting. A URL that does not parse, or is not a URL
// (keyword=value), is returned as it is: connecting reports it.
func Session(databaseURL string) string {
	u, err := url.Parse(databaseURL)
	if err != nil || u.Scheme == "" {
		return databaseURL
	}
	q := u.Query()
	changed := false
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
			changed = true
		}
	}
	if !changed {
		return databaseURL
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// lockKeepalives are the server's TCP keepalive settings for a session whose
// locks others wait on (shard leases, an operator's recovery lock). A client
// whose process dies closes its socket and the server frees its locks at
// once; one whose host dies (power, kernel, network) sends nothing, and the
// server would hold its locks until the system's keepalive noticed, two
// hours by default. With these it notices within about 8 s: 5 s idle, then
// three probes a second apart. Keepalives are not sent while the server's
// last reply is unacknowledged (a host that died just as it was answered):
// then tcp_user_timeout ends the wait for the acknowledgement after 8 s,
// where retransmissions would go on for about 15 minutes. They apply to
// TCP only.
var lockKeepalives = map[string]string{
	"tcp_keepalives_idle":     "5",
	"tcp_keepalives_interval": "1",
	"tcp_keepalives_count":    "3",
	"tcp_user_timeout":        "8000",
}

// KeepLocksAlive adds lockKeepalives to a session's run-time parameters,
// but for any the URL sets itself, as a parameter of its own or in its
// options (-c name=value), which these would otherwise override.
func KeepLocksAlive(params map[string]string) {
	for k, v := range lockKeepalives {
		if _, ok := params[k]; !ok && !strings.Contains(params["options"], k) {
			params[k] = v
		}
	}
}

// Writable makes a connection's settings accept only a server that takes
// writes (target_session_attrs=read-write), unless databaseURL or the
// environment (PGTARGETSESSIONATTRS) asks for something else. Every
// connection the daemons open writes or holds locks writers must see: one
// made while the server was read-only (a failover's standby not yet
// promoted, a database set default_transaction_read_only) would refuse
// every write, or hold a lease no writer sees, for as long as it lived, a
// pool's up to an hour. With several hosts in the URL, the writable one is
// found.
func Writable(c *pgconn.Config, databaseURL string) {
	if c.ValidateConnect == nil && WantsWritable(databaseURL) {
		c.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	}
}

// WantsWritable reports whether a connection to databaseURL is to be made
// writable only (Writable): unless the URL or the environment says which
// servers it accepts.
func WantsWritable(databaseURL string) bool {
	return !strings.Contains(databaseURL, "target_session_attrs") && os.Getenv("PGTARGETSESSIONATTRS") == ""
}

// SessionConfig is the settings of a connection of its own (Session's URL),
// Writable.
func SessionConfig(databaseURL string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(Session(databaseURL))
	if err != nil {
		return nil, err
	}
	Writable(&cfg.Config, databaseURL)
	return cfg, nil
}
