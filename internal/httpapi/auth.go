package httpapi

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"redpacket/internal/apikey"
	"redpacket/internal/reqctx"
)

// Keys checks API keys (apikey.Keyring): the key a bearer token is, if it
// is an active one.
type Keys interface {
	Lookup(token string) (apikey.Key, bool)
}

// auth is how /v1/ requests are authenticated: not at all, by the one
// token, or by API keys with scopes.
type auth struct {
	token string
	keys  Keys
}

func newAuth(token string, keys Keys) auth {
	if token != "" && keys != nil {
		panic("httpapi: a token and API keys at once") // the settings refuse it at start
	}
	return auth{token: token, keys: keys}
}

// serveAuthenticated authenticates /v1/ requests, then routes.
func (a *API) serveAuthenticated(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		if challenge, ok := a.auth.authenticate(r); !ok {
			w.Header().Set("WWW-Authenticate", challenge)
			a.writeError(w, r, errUnauthenticated)
			return
		}
	}
	a.router.ServeHTTP(w, r)
}

// The challenges of a 401 (RFC 6750 3): a request without bearer
// credentials is told the scheme; one whose token is wrong, the error too.
const (
	challengeNoToken  = `Bearer realm="redpacket"`
	challengeBadToken = `Bearer realm="redpacket", error="invalid_token", error_description="the bearer token is not valid"`
)

// insufficientScopeChallenge is the challenge of a 403: the scope needed
// (RFC 6750 3.1).
func insufficientScopeChallenge(s apikey.Scope) string {
	return `Bearer realm="redpacket", error="insufficient_scope", scope="` + s.String() + `"`
}

// authenticate reports whether r carries credentials the API takes, and
// otherwise the challenge to answer with. With keys, the key's client and
// scopes go into the request's Info.
func (au auth) authenticate(r *http.Request) (challenge string, ok bool) {
	if au.token == "" && au.keys == nil {
		return "", true
	}
	token, isBearer := bearerToken(r.Header.Get("Authorization"))
	if !isBearer {
		return challengeNoToken, false
	}
	if au.keys == nil {
		if subtle.ConstantTimeCompare([]byte(token), []byte(au.token)) != 1 {
			return challengeBadToken, false
		}
		return "", true
	}
	key, found := au.keys.Lookup(token)
	info := reqctx.From(r.Context())
	if !found || info == nil {
		return challengeBadToken, false
	}
	info.Client, info.Scopes = key.Client, key.Scopes
	return "", true
}

// permit checks that the request's key holds scope; without keys, anything
// that passed authentication is permitted.
func (au auth) permit(info *reqctx.Info, scope apikey.Scope) error {
	if au.keys == nil || (info != nil && info.Scopes.Has(scope)) {
		return nil
	}
	return fmt.Errorf("%w: this API key lacks the scope %q", apikey.ErrInsufficientScope, scope.String())
}

// bearerToken reads credentials of the Bearer scheme: the scheme's name in
// any letter case (RFC 9110 11.1), then one or more spaces and the token
// (RFC 6750 2.1).
func bearerToken(h string) (string, bool) {
	scheme, token, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(token, " "), true
}
