package apispec

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Require returns the contract, stopping t when it cannot be loaded.
func Require(t testing.TB) *Spec {
	t.Helper()
	s, err := Load()
	if err != nil {
		t.Fatalf("load the API contract: %v", err)
	}
	return s
}

// Report fails t with what in ex breaks the contract.
func (s *Spec) Report(t testing.TB, ex Exchange) {
	t.Helper()
	if problems := s.Check(ex); len(problems) > 0 {
		t.Errorf("%s %s answered %d %s: drift from %s:\n%s", ex.Request.Method, ex.Request.URL.RequestURI(),
			ex.Status, bytes.TrimSpace(ex.ResponseBody), File, strings.Join(problems, "\n"))
	}
}

// Transport returns base (nil: http.DefaultTransport) with every exchange
// checked against the contract; a drift fails t. For clients of servers
// run as processes.
func Transport(t testing.TB, base http.RoundTripper, otherServer bool) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &checkingTransport{t: t, s: Require(t), base: base, otherServer: otherServer}
}

type checkingTransport struct {
	t           testing.TB
	s           *Spec
	base        http.RoundTripper
	otherServer bool
}

func (c *checkingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		_ = r.Body.Close()
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	res, err := c.base.RoundTrip(r)
	if err != nil {
		return res, err
	}
	answer, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		// The caller sees the answer cut short as it was; nothing whole to check.
		res.Body = io.NopCloser(io.MultiReader(bytes.NewReader(answer), errReader{err}))
		return res, nil
	}
	res.Body = io.NopCloser(bytes.NewReader(answer))
	c.s.Report(c.t, Exchange{Request: r, RequestBody: body, Status: res.StatusCode, Header: res.Header,
		ResponseBody: answer, OtherServer: c.otherServer})
	return res, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
