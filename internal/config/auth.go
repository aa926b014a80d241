package config

import "strings"

// AuthMode is how the grabber authenticates /v1/ requests (GRABBER_AUTH).
type AuthMode string

// The modes.
const (
	AuthNone  AuthMode = "none"  // every request is served
	AuthToken AuthMode = "token" // the one bearer token GRABBER_API_TOKEN
	AuthKeys  AuthMode = "keys"  // per-client API keys with scopes (flusher apikey)
)

var authModes = []AuthMode{AuthNone, AuthToken, AuthKeys}

// authMode reads GRABBER_AUTH: by default token when GRABBER_API_TOKEN is
// set, none when not. A mode the token contradicts is refused rather than
// one of them ignored: a token set for keys (or none) would look like
// protection and be none, and token without one has nothing to check.
func (r *reader) authMode(name string, hasToken bool) AuthMode {
	v := r.getenv(name)
	if v == "" {
		if hasToken {
			return AuthToken
		}
		return AuthNone
	}
	mode := AuthMode(v)
	switch {
	case mode == AuthToken && !hasToken:
		r.fail(name, v, "needs GRABBER_API_TOKEN, the token to require")
	case mode == AuthNone && hasToken:
		r.fail(name, v, "but GRABBER_API_TOKEN is set: unset it to serve without authentication, or use token")
	case mode == AuthKeys && hasToken:
		r.fail(name, v, "takes API keys (flusher apikey create), not GRABBER_API_TOKEN: unset the token")
	case mode != AuthNone && mode != AuthToken && mode != AuthKeys:
		names := make([]string, len(authModes))
		for i, m := range authModes {
			names[i] = string(m)
		}
		r.fail(name, v, "must be one of "+strings.Join(names, ", "))
		return AuthNone
	}
	return mode
}

// onOff reads a switch: on or off.
func (r *reader) onOff(name string, def bool) bool {
	switch v := r.getenv(name); v {
	case "":
		return def
	case "on":
		return true
	case "off":
		return false
	default:
		r.fail(name, v, "must be on or off")
		return def
	}
}

// optionalListenAddr reads an address to listen on, or nothing.
func (r *reader) optionalListenAddr(name string) string {
	v := r.getenv(name)
	if v != "" {
		if err := checkHostPort(v, true); err != nil {
			r.fail(name, v, err.Error())
		}
	}
	return v
}
