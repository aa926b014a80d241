package httpapi

import (
	"net/http"
	"net/url"
	"strings"

	"redpacket/internal/apikey"
)

// The grab is routed without the ServeMux: matching its two wildcards
// allocates the path values (several allocations a request), and the grab is
// the request the service is sized by. fastGrab takes only the paths the mux
// would give the grab's handler, and answers them exactly as that route does;
// anything else goes on to the mux.

// grabRoute is the grab's route, as the access log and Info.Route name it;
// envelopeSubPattern is the mux's pattern that serves it, which the metrics
// read from Request.Pattern.
const (
	grabRoute          = http.MethodPost + " /v1/envelopes/{id}/grab"
	envelopeSubPattern = "/v1/envelopes/{id}/{sub}"
)

// fastGrab serves r if it is a grab and reports whether it did. The router
// has already refused a path that is not clean and a malformed query.
func (a *API) fastGrab(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	id, ok := grabPathID(r.URL)
	if !ok {
		return false
	}
	r.Pattern = envelopeSubPattern
	if a.permitted(w, r, grabRoute, apikey.ScopeGrab) {
		a.grabID(w, r, id)
	}
	return true
}

// grabPathID returns the {id} of a path /v1/envelopes/{id}/grab whose id is
// all digits, and whether the path is one. Digits need no escaping, so the
// mux would read the same id; a path that was sent with escapes the plain
// form does not give back (RawPath set) is left to the mux.
func grabPathID(u *url.URL) (string, bool) {
	if u.RawPath != "" {
		return "", false
	}
	rest, ok := strings.CutPrefix(u.Path, "/v1/envelopes/")
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, "/grab")
	if !ok || id == "" {
		return "", false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < '0' || c > '9' {
			return "", false
		}
	}
	return id, true
}
