// Package dburl reads DATABASE_URL for the connections the daemons open
// outside their pool: shard leases, the events listener, migrations.
package dburl

import (
	"net/url"
	"strings"
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
