// Package redact keeps secrets out of logs and error messages: the
// credentials and query values a URL may carry, and known secret values
// inside any text.
package redact

import (
	"net/url"
	"strings"
)

// Mask replaces each secret.
const Mask = "xxxxx"

// URL returns raw with its secrets masked, for a log line or a message: the
// password (or a user name without one, which is how a token rides in a
// URL), every query value and the fragment. A value that does not parse as a
// URL with a scheme is not shown at all: a key=value connection string
// ("host=db password=..."), which the URL parser takes for a path, among
// them.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Scheme == "" {
		return "(not shown: not a valid URL)"
	}
	if u.User != nil {
		if _, hasPassword := u.User.Password(); hasPassword {
			u.User = url.UserPassword(u.User.Username(), Mask)
		} else {
			u.User = url.User(Mask)
		}
	}
	if u.RawQuery != "" {
		pairs := strings.Split(u.RawQuery, "&")
		for i, p := range pairs {
			if k, _, ok := strings.Cut(p, "="); ok {
				pairs[i] = k + "=" + Mask
			}
		}
		u.RawQuery = strings.Join(pairs, "&")
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// Secrets returns the secrets a URL carries, decoded and as written: its
// password, a user name without a password, and every query value.
// Nothing when it does not parse.
func Secrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	if u.User != nil {
		written := u.User.String() // escaped: user or user:password
		if p, ok := u.User.Password(); ok {
			_, rawPassword, _ := strings.Cut(written, ":")
			out = append(out, p, rawPassword)
		} else {
			out = append(out, u.User.Username(), written)
		}
	}
	for _, p := range strings.Split(u.RawQuery, "&") {
		if _, v, ok := strings.Cut(p, "="); ok && v != "" {
			out = append(out, v)
			if dec, err := url.QueryUnescape(v); err == nil {
				out = append(out, dec)
			}
		}
	}
	return out
}

// Text returns s with every occurrence of each secret (and of its URL
// escaped forms) masked: for a library's message that may repeat them. A
// short secret is masked too, even where the same letters are other words:
// the message may read oddly, but it shows nothing.
func Text(s string, secrets ...string) string {
	for _, sec := range secrets {
		if sec == "" {
			continue
		}
		for _, form := range []string{sec, url.QueryEscape(sec), url.PathEscape(sec)} {
			s = strings.ReplaceAll(s, form, Mask)
		}
	}
	return s
}
