package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"redpacket/internal/redact"
)

// The readers of settings with a shape: each refuses a value that would fail
// later (or be read differently than meant), and none repeats a secret in
// its message: URLs are shown with their passwords and query values masked.

// failURL reports a URL setting without the secrets it may hold.
func (r *reader) failURL(name, val, why string) {
	r.errs = append(r.errs, fmt.Errorf("%s=%q: %s", name, redact.URL(val), why))
}

// failURLErr reports a library's complaint about a URL setting, with the
// URL's secrets masked wherever the library repeats them.
func (r *reader) failURLErr(name, val string, err error) {
	r.failURL(name, val, redact.Text(err.Error(), redact.Secrets(val)...))
}

// databaseURL reads a postgres:// URL (the migrations need a URL; pgx would
// also take key=value pairs) that pgx can use.
func (r *reader) databaseURL(name, def string) string {
	v := r.str(name, def)
	u, err := url.Parse(v)
	switch {
	case err != nil:
		r.failURL(name, v, "must be a URL such as postgres://user:password@host:5432/db?sslmode=disable")
	case u.Scheme != "postgres" && u.Scheme != "postgresql":
		r.failURL(name, v, "must be a postgres:// or postgresql:// URL")
	default:
		if _, err := pgxpool.ParseConfig(v); err != nil {
			r.failURLErr(name, v, err)
		}
	}
	return v
}

// redisURL reads a redis:// or rediss:// URL; not used, and so not
// checked, when REDIS_CLUSTER_ADDRS is set.
func (r *reader) redisURL(name, def string) string {
	v := r.str(name, def)
	if len(r.list("REDIS_CLUSTER_ADDRS")) > 0 {
		return v
	}
	if _, err := url.Parse(v); err != nil {
		r.failURL(name, v, "must be a URL such as redis://:password@host:6379/0")
		return v
	}
	opts, err := redis.ParseURL(v)
	if err != nil {
		r.failURLErr(name, v, err)
		return v
	}
	if err := checkHostPort(opts.Addr, false); err != nil {
		r.failURLErr(name, v, err)
	}
	return v
}

// addrs reads a comma-separated list of host:port.
func (r *reader) addrs(name string) []string {
	out := r.list(name)
	for _, a := range out {
		if err := checkHostPort(a, false); err != nil {
			r.fail(name, r.getenv(name), err.Error())
			break
		}
	}
	return out
}

// listenAddr reads an address to listen on: [host]:port.
func (r *reader) listenAddr(name, def string) string {
	v := r.str(name, def)
	if err := checkHostPort(v, true); err != nil {
		r.fail(name, v, err.Error())
	}
	return v
}

func checkHostPort(a string, listen bool) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil || (host == "" && !listen) {
		return fmt.Errorf("%q must be host:port", a)
	}
	lo := 1
	if listen {
		lo = 0 // :0 picks a free port
	}
	if n, err := strconv.Atoi(port); err != nil || n < lo || n > 65535 {
		return fmt.Errorf("%q: the port must be a number from %d to 65535", a, lo)
	}
	return nil
}

// listenersOverlap says whether listening on a and on b (each [host]:port)
// would clash: the same port, other than 0 (a free port each time), on the
// same address, or on any address when either host is left out or is
// 0.0.0.0 or :: (Go listens on every address of the machine for those,
// IPv4 and IPv6). localhost stands for both loopback addresses. A name
// other than localhost is compared as written (it is not looked up).
func listenersOverlap(a, b string) bool {
	hostA, portA, errA := net.SplitHostPort(a)
	hostB, portB, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return false // refused by listenAddr already
	}
	pa, errA := strconv.Atoi(portA)
	pb, errB := strconv.Atoi(portB)
	if errA != nil || errB != nil || pa != pb || pa == 0 {
		return false
	}
	ipsA, ipsB := listenIPs(hostA), listenIPs(hostB)
	if ipsA == nil || ipsB == nil { // a name: compare as written, but a wildcard takes every address
		return strings.EqualFold(hostA, hostB) || unspecified(ipsA) || unspecified(ipsB)
	}
	for _, x := range ipsA {
		for _, y := range ipsB {
			if x.IsUnspecified() || y.IsUnspecified() || x.Equal(y) {
				return true
			}
		}
	}
	return false
}

// listenIPs is the addresses a listener's host stands for: the unspecified
// address for "" (every address), the loopback ones for localhost, the
// address itself for one; nil for a name.
func listenIPs(host string) []net.IP {
	switch {
	case host == "":
		return []net.IP{net.IPv6unspecified}
	case strings.EqualFold(host, "localhost"):
		return []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	if ip := net.ParseIP(host); ip != nil {
		return []net.IP{ip}
	}
	return nil
}

// token reads a bearer token: b64token characters (RFC 6750 2.1), the only
// ones a client can send in the header. Never repeated in a message.
func (r *reader) token(name string) string {
	v := r.getenv(name)
	t := strings.TrimRight(v, "=")
	ok := t != "" || v == ""
	for _, c := range t {
		ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.ContainsRune("-._~+/", c))
	}
	if !ok {
		r.errs = append(r.errs, fmt.Errorf("%s: must hold only letters, digits and -._~+/ (then = signs); "+
			"the value is a secret and not shown", name))
	}
	return v
}

var logLevels = []string{"debug", "info", "warn", "error"}

func (r *reader) logLevel(name, def string) string {
	v := r.str(name, def)
	for _, l := range logLevels {
		if v == l {
			return v
		}
	}
	r.fail(name, v, "must be one of "+strings.Join(logLevels, ", "))
	return def
}

// unspecified tells whether ips listen on every address (an empty host,
// 0.0.0.0 or ::).
func unspecified(ips []net.IP) bool {
	for _, ip := range ips {
		if ip.IsUnspecified() {
			return true
		}
	}
	return false
}
