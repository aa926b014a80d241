package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzGrabPath: a path the grab's short route takes is one the mux gives the
// grab's handler, with the same {id}; and of the paths the mux gives it, the
// short route takes every one whose id is all digits and sent as is.
func FuzzGrabPath(f *testing.F) {
	for _, p := range []string{"/v1/envelopes/1001/grab", "/v1/envelopes/01001/grab", "/v1/envelopes//grab",
		"/v1/envelopes/by-code/grab", "/v1/envelopes/1%2F2/grab", "/v1/envelopes/%31/grab", "/v1/envelopes/1/grab/",
		"/v1/envelopes/1/grab?x=1", "/v1/envelopes/1/2/grab", "/v1/envelopes/+1/grab", "/v1/envelopes/1/close",
		"/v1/envelopes/1%30/grab", "/v1/envelopes/1/gr%61b", "/v1//envelopes/1/grab"} {
		f.Add(p)
	}
	mux := http.NewServeMux()
	var id, sub string
	mux.HandleFunc("/v1/envelopes/{id}/{sub}", func(_ http.ResponseWriter, r *http.Request) {
		id, sub = r.PathValue("id"), r.PathValue("sub")
	})
	mux.HandleFunc("/v1/envelopes/{id}", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/", func(http.ResponseWriter, *http.Request) {})
	f.Fuzz(func(t *testing.T, target string) {
		if len(target) == 0 || target[0] != '/' {
			return
		}
		var r *http.Request
		func() {
			defer func() { _ = recover() }() // a target NewRequest cannot parse
			r = httptest.NewRequest(http.MethodPost, target, nil)
		}()
		if r == nil || !cleanPath(r.URL.Path) {
			return // the router answers 404 before routing
		}
		id, sub = "", ""
		mux.ServeHTTP(httptest.NewRecorder(), r)
		fastID, fast := grabPathID(r.URL)
		if fast && (sub != "grab" || id != fastID || r.Pattern != envelopeSubPattern) {
			t.Fatalf("%q: short route id %q, mux %q %q (pattern %q)", target, fastID, id, sub, r.Pattern)
		}
		if !fast && sub == "grab" && digits(id) && r.URL.RawPath == "" {
			t.Fatalf("%q: the mux gives the grab id %q, the short route takes nothing", target, id)
		}
	})
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
