package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The create and status answers carry how the envelope is offered, and
// never the password.
func TestCreateAndStatusEchoTheExtras(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	start := s.Clock.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000Z")
	body := `{"sender_id":"s","total_cents":300,"count":3,"kind":"fixed","recipients":["a","b","c"],` +
		`"password":"芝麻开门","greeting":"恭喜发财","metadata":{"campaign":"cny-2027","shop.id":"42"},` +
		`"starts_at":"` + start + `","expires_in_seconds":60}`
	a := c.do("POST", "/v1/envelopes", body)
	if strings.Contains(string(a.Body), "芝麻开门") {
		t.Fatalf("the create answer holds the password: %s", a)
	}
	e := c.create(strings.Replace(body, `"s"`, `"s2"`, 1))
	want := extras{Kind: "fixed", RecipientsCount: 3, HasPassword: true, Greeting: "恭喜发财",
		Metadata: map[string]string{"campaign": "cny-2027", "shop.id": "42"}, StartsAt: start}
	if fmt.Sprint(e.extras) != fmt.Sprint(want) {
		t.Fatalf("create answer %+v, want %+v", e.extras, want)
	}
	if exp := parseTime(t, "expires_at", e.ExpiresAt); !exp.Equal(parseTime(t, "starts_at", start).Add(time.Minute)) {
		t.Fatalf("expires_at %s, want a minute after starts_at %s", e.ExpiresAt, start)
	}
	a = c.do("GET", statusPath(e.EnvelopeID), "")
	if strings.Contains(string(a.Body), "芝麻开门") || strings.Contains(string(a.Body), "digest") {
		t.Fatalf("the status answer holds the password: %s", a)
	}
	st := c.status(e.EnvelopeID)
	if fmt.Sprint(st.extras) != fmt.Sprint(want) {
		t.Fatalf("status answer %+v, want %+v", st.extras, want)
	}
	plain := c.createN(100, 1, 60)
	if plain.Kind != "random" || plain.HasPassword || plain.RecipientsCount != 0 || plain.Metadata == nil ||
		plain.StartsAt == "" {
		t.Fatalf("a plain envelope's extras: %+v", plain.extras)
	}
}

// Each refusal is its own code and takes nothing; a holder's repeat comes
// before every check.
func TestGrabGates(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	start := s.Clock.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano)
	e := c.create(`{"sender_id":"s","total_cents":200,"count":2,"kind":"fixed","recipients":["a","b","c"],` +
		`"password":"pw","starts_at":"` + start + `"}`)
	grab := func(user, password string) answer {
		body := fmt.Sprintf(`{"user_id":%q,"password":%q}`, user, password)
		if password == "" {
			body = fmt.Sprintf(`{"user_id":%q}`, user)
		}
		return c.do("POST", grabPath(e.EnvelopeID), body)
	}
	wantCode := func(a answer, status int, code string) {
		t.Helper()
		if a.Status != status || !strings.Contains(string(a.Body), `"code":"`+code+`"`) {
			t.Fatalf("answer %s, want %d %s", a, status, code)
		}
	}
	wantCode(grab("a", "pw"), http.StatusConflict, "not_started")
	s.Clock.Advance(time.Minute)
	wantCode(grab("x", "pw"), http.StatusForbidden, "not_recipient")
	wantCode(grab("a", "pW"), http.StatusForbidden, "wrong_password")
	wantCode(grab("a", ""), http.StatusForbidden, "wrong_password")
	if st := c.status(e.EnvelopeID); st.GrabbedCount != 0 || st.RemainingCount != 2 {
		t.Fatalf("refused grabs took packets: %+v", st)
	}
	a := grab("a", "pw")
	if a.Status != http.StatusOK || !strings.Contains(string(a.Body), `"amount_cents":100`) {
		t.Fatalf("a recipient with the password: %s", a)
	}
	// The holder repeats without the password, before the start check too.
	if r := grab("a", ""); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"repeat":true`) {
		t.Fatalf("the holder's repeat: %s", r)
	}
	if r := grab("b", "pw"); r.Status != http.StatusOK {
		t.Fatalf("the second recipient: %s", r)
	}
	// Sold out now: every other grab is told so.
	wantCode(grab("c", "pw"), http.StatusConflict, "sold_out")
	wantCode(grab("x", "nope"), http.StatusConflict, "sold_out")
}

func TestCloseEndpoint(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	e := c.createN(500, 5, 3600)
	c.grab(e.EnvelopeID, "u1")
	path := fmt.Sprintf("/v1/envelopes/%d/close", e.EnvelopeID)
	a := c.do("POST", path, "")
	var st statusResponse
	if a.Status != http.StatusOK {
		t.Fatalf("close: %s", a)
	}
	requireJSON(t, a, &st)
	if st.Status != "expired" || st.ClosedAt == nil || st.GrabbedCount != 1 {
		t.Fatalf("close answer %+v", st)
	}
	if r := c.grabAnswer(e.EnvelopeID, "u2"); r.Status != http.StatusConflict || !strings.Contains(string(r.Body), "expired") {
		t.Fatalf("a grab after the close: %s", r)
	}
	if r := c.do("POST", path, "{}"); r.Status != http.StatusOK || !strings.Contains(string(r.Body), *st.ClosedAt) {
		t.Fatalf("closing again: %s", r)
	}
	if r := c.do("POST", "/v1/envelopes/987654/close", ""); r.Status != http.StatusNotFound {
		t.Fatalf("closing an unknown envelope: %s", r)
	}
	if r := c.do("GET", path, ""); r.Status != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "POST" {
		t.Fatalf("GET close: %s, Allow %q", r, r.Header.Get("Allow"))
	}
}

// Closing an envelope whose last packet was grabbed changes nothing, also
// before the flusher has written its claims: it keeps its expiry, gets no
// closed_at, and stays sold out.
func TestCloseSoldOutChangesNothing(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	e := c.createN(200, 2, 3600)
	c.grab(e.EnvelopeID, "u1")
	c.grab(e.EnvelopeID, "u2")
	path := fmt.Sprintf("/v1/envelopes/%d", e.EnvelopeID)
	var before, after statusResponse
	requireJSON(t, c.do("GET", path, ""), &before)
	a := c.do("POST", path+"/close", "")
	if a.Status != http.StatusOK {
		t.Fatalf("close: %s", a)
	}
	requireJSON(t, a, &after)
	if after.Status != "sold_out" || after.ClosedAt != nil || after.ExpiresAt != before.ExpiresAt {
		t.Errorf("closing a sold-out envelope: %+v, before %+v", after, before)
	}
}

// The create body is read as strictly with the new fields: a field given
// twice (also inside metadata) or in another letter case is refused.
func TestCreateExtrasAreStrict(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	for _, body := range []string{
		`{"sender_id":"s","total_cents":100,"count":1,"password":"a","password":"b"}`,
		`{"sender_id":"s","total_cents":100,"count":1,"password":"a","passw\u006frd":"b"}`,
		`{"sender_id":"s","total_cents":100,"count":1,"Password":"a"}`,
		`{"sender_id":"s","total_cents":100,"count":1,"RECIPIENTS":["a"]}`,
		`{"sender_id":"s","total_cents":100,"count":1,"metadata":{"k":"1","k":"2"}}`,
		`{"sender_id":"s","total_cents":100,"count":1,"metadata":{"k":1}}`,
		`{"sender_id":"s","total_cents":100,"count":1,"kind":"lucky"}`,
		`{"sender_id":"s","total_cents":101,"count":2,"kind":"fixed"}`,
		`{"sender_id":"s","total_cents":20001,"count":1}`,
		`{"sender_id":"s","total_cents":100,"count":2,"recipients":["a"]}`,
		`{"sender_id":"s","total_cents":100,"count":1,"starts_at":"tomorrow"}`,
		`{"sender_id":"s","total_cents":100,"count":1,"greeting":"a\u0007"}`,
	} {
		if a := c.do("POST", "/v1/envelopes", body); a.Status != http.StatusBadRequest ||
			!strings.Contains(string(a.Body), "invalid_argument") {
			t.Errorf("create %s: %s, want 400 invalid_argument", body, a)
		}
	}
	if n := envelopeRows(t, s); n != 0 {
		t.Errorf("%d envelopes written by refused creates", n)
	}
}

// The largest create the documented limits allow fits the body limit, even
// with every metadata character written as a \u escape pair.
func TestLargestDocumentedCreateFits(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	recipients := make([]string, 1000)
	for i := range recipients {
		recipients[i] = fmt.Sprintf("%q", fmt.Sprintf("%064d", i))
	}
	meta := make([]string, 20)
	for i := range meta {
		meta[i] = fmt.Sprintf(`"%s%02d":"%s"`, strings.Repeat("k", 38), i, strings.Repeat(`\ud83e\udde7`, 500))
	}
	body := `{"sender_id":"s","total_cents":100000,"count":1000,"recipients":[` + strings.Join(recipients, ",") +
		`],"metadata":{` + strings.Join(meta, ",") + `},"greeting":"` + strings.Repeat(`\ud83e\udde7`, 64) + `"}`
	if len(body) < 180_000 {
		t.Fatalf("body of %d bytes: not the largest create", len(body))
	}
	if a := c.do("POST", "/v1/envelopes", body); a.Status != http.StatusCreated {
		t.Fatalf("largest documented create (%d bytes): %s", len(body), a)
	}
}
