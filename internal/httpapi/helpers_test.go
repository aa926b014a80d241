package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"redpacket/internal/httpapi"
	"redpacket/internal/testenv/stack"
)

// testToken is the bearer token of the APIs built by newClient with auth.
const testToken = "s3cret-token"

// msTimestamp is the API's time format: UTC with exactly 3 fraction digits.
var msTimestamp = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)

// client sends requests straight to the handler, as a client would see them.
type client struct {
	t     testing.TB
	h     http.Handler
	token string // sent as a bearer token when not empty
}

// newClient builds a stack and the API over it, without a token.
func newClient(t testing.TB) (*stack.Stack, client) {
	t.Helper()
	s := stack.New(t)
	return s, client{t: t, h: httpapi.New(s.Svc, httpapi.Options{})}
}

// newAuthClient builds a stack and the API over it with testToken required;
// the client does not send a token until one is set.
func newAuthClient(t testing.TB) (*stack.Stack, client) {
	t.Helper()
	s := stack.New(t)
	return s, client{t: t, h: httpapi.New(s.Svc, httpapi.Options{Token: testToken})}
}

// answer is what came back.
type answer struct {
	Status int
	Header http.Header
	Body   []byte
}

func (a answer) String() string { return fmt.Sprintf("%d %s", a.Status, bytes.TrimSpace(a.Body)) }

// do sends one request; body "" sends no body.
func (c client) do(method, path, body string) answer {
	c.t.Helper()
	return c.doHeaders(method, path, body, nil)
}

// doHeaders sends one request with extra headers (they replace the bearer
// token when they set Authorization).
func (c client) doHeaders(method, path, body string, headers map[string]string) answer {
	c.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	res := rec.Result()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	checkContract(c.t, c.h, req, body, res, b)
	return answer{Status: res.StatusCode, Header: res.Header, Body: b}
}

// requireJSON checks the Content-Type and decodes the body strictly into v.
func requireJSON(t testing.TB, a answer, v any) {
	t.Helper()
	ct := a.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json (answer %s)", ct, a)
	}
	dec := json.NewDecoder(bytes.NewReader(a.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, a, err)
	}
	if dec.More() {
		t.Fatalf("more than one JSON value in %s", a)
	}
}

// keys returns the top-level field names of a JSON object answer.
func keys(t testing.TB, a answer) map[string]bool {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(a.Body, &m); err != nil {
		t.Fatalf("answer is not a JSON object: %s: %v", a, err)
	}
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// requireKeys checks that the answer's fields are exactly want.
func requireKeys(t testing.TB, a answer, want ...string) {
	t.Helper()
	got := keys(t, a)
	for _, k := range want {
		if !got[k] {
			t.Errorf("answer lacks field %q: %s", k, a)
		}
		delete(got, k)
	}
	for k := range got {
		t.Errorf("answer has unexpected field %q: %s", k, a)
	}
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// requireError checks status, code and the error shape, and returns the
// message.
func requireError(t testing.TB, a answer, status int, code string) string {
	t.Helper()
	if a.Status != status {
		t.Fatalf("status = %d, want %d (answer %s)", a.Status, status, a)
	}
	var e errorBody
	requireJSON(t, a, &e)
	if e.Error.Code != code {
		t.Fatalf("error code = %q, want %q (answer %s)", e.Error.Code, code, a)
	}
	if e.Error.Message == "" {
		t.Fatalf("error message is empty: %s", a)
	}
	return e.Error.Message
}

type createResponse struct {
	EnvelopeID int64  `json:"envelope_id"`
	ShareCode  string `json:"share_code"`
	SenderID   string `json:"sender_id"`
	TotalCents int64  `json:"total_cents"`
	Count      int    `json:"count"`
	Status     string `json:"status"`
	ExpiresAt  string `json:"expires_at"`
	extras
	// SplitCommitment is checked by the split tests.
	SplitCommitment string `json:"split_commitment"`
}

// extras are the fields the create and status answers share.
type extras struct {
	Kind            string            `json:"kind"`
	RecipientsCount int               `json:"recipients_count"`
	HasPassword     bool              `json:"has_password"`
	Greeting        string            `json:"greeting"`
	Metadata        map[string]string `json:"metadata"`
	StartsAt        string            `json:"starts_at"`
}

type grabResponse struct {
	EnvelopeID  int64  `json:"envelope_id"`
	PacketID    int64  `json:"packet_id"`
	AmountCents int64  `json:"amount_cents"`
	OrderNo     string `json:"order_no"`
	GrabbedAt   string `json:"grabbed_at"`
	Repeat      bool   `json:"repeat"`
}

type statusResponse struct {
	EnvelopeID     int64   `json:"envelope_id"`
	ShareCode      string  `json:"share_code"`
	SenderID       string  `json:"sender_id"`
	Status         string  `json:"status"`
	TotalCents     int64   `json:"total_cents"`
	Count          int     `json:"count"`
	GrabbedCount   int64   `json:"grabbed_count"`
	GrabbedCents   int64   `json:"grabbed_cents"`
	RemainingCount int64   `json:"remaining_count"`
	RefundedCents  int64   `json:"refunded_cents"`
	CreatedAt      string  `json:"created_at"`
	ExpiresAt      string  `json:"expires_at"`
	SettledAt      *string `json:"settled_at"`
	ClosedAt       *string `json:"closed_at"`
	extras
	Best *claim `json:"best"`
}

// create makes an envelope and requires 201.
func (c client) create(body string) createResponse {
	c.t.Helper()
	a := c.do("POST", "/v1/envelopes", body)
	if a.Status != http.StatusCreated {
		c.t.Fatalf("create %s: %s, want 201", body, a)
	}
	var r createResponse
	requireJSON(c.t, a, &r)
	return r
}

// createN makes an envelope of total cents in count packets that expires
// after seconds.
func (c client) createN(total, count, seconds int64) createResponse {
	c.t.Helper()
	return c.create(fmt.Sprintf(`{"sender_id":"sender-1","total_cents":%d,"count":%d,"expires_in_seconds":%d}`,
		total, count, seconds))
}

func grabPath(id int64) string   { return fmt.Sprintf("/v1/envelopes/%d/grab", id) }
func statusPath(id int64) string { return fmt.Sprintf("/v1/envelopes/%d", id) }

// grabAnswer grabs without judging the answer.
func (c client) grabAnswer(id int64, user string) answer {
	c.t.Helper()
	return c.do("POST", grabPath(id), fmt.Sprintf(`{"user_id":%q}`, user))
}

// grab grabs and requires 200.
func (c client) grab(id int64, user string) grabResponse {
	c.t.Helper()
	a := c.grabAnswer(id, user)
	if a.Status != http.StatusOK {
		c.t.Fatalf("grab %d as %s: %s, want 200", id, user, a)
	}
	var r grabResponse
	requireJSON(c.t, a, &r)
	return r
}

// status reads an envelope's status and requires 200.
func (c client) status(id int64) statusResponse {
	c.t.Helper()
	a := c.do("GET", statusPath(id), "")
	if a.Status != http.StatusOK {
		c.t.Fatalf("status of %d: %s, want 200", id, a)
	}
	var r statusResponse
	requireJSON(c.t, a, &r)
	return r
}

// parseTime parses an API timestamp, requiring millisecond precision.
func parseTime(t testing.TB, field, s string) time.Time {
	t.Helper()
	if !msTimestamp.MatchString(s) {
		t.Fatalf("%s = %q, want UTC with millisecond precision like 2026-11-22T10:00:00.000Z", field, s)
	}
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("%s = %q: %v", field, s, err)
	}
	return ts
}

// setClock moves the stack's clock to at.
func setClock(s *stack.Stack, at time.Time) { s.Clock.Advance(at.Sub(s.Clock.Now())) }

// envelopeRows counts the rows of the envelopes table.
func envelopeRows(t testing.TB, s *stack.Stack) int {
	t.Helper()
	var n int
	if err := s.Pool.QueryRow(context.Background(), "SELECT count(*) FROM envelopes").Scan(&n); err != nil {
		t.Fatalf("count envelopes: %v", err)
	}
	return n
}
