package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"redpacket/internal/pgstore"
)

// maxBody and maxCreateBody are the documented body limits (64 KiB; a
// create's 256 KiB).
const (
	maxBody       = 64 << 10
	maxCreateBody = 256 << 10
)

// padded returns the JSON object of fields (without braces), padded with
// whitespace inside the braces to exactly size bytes: a valid body whose only
// fault, if any, is its size.
func padded(fields string, size int) string {
	s := "{" + fields
	return s + strings.Repeat(" ", size-len(s)-1) + "}"
}

// badBodies are bodies every JSON endpoint rejects with invalid_argument
// whatever the fields, with a piece of the message to expect ("" for any).
var badBodies = []struct {
	name, body, msg string
}{
	{"empty body", "", "JSON object"},
	{"blank body", " \n\t", "JSON object"},
	{"array", "[]", "JSON object"},
	{"string", `"x"`, "JSON object"},
	{"null", "null", "JSON object"},
	{"number", "42", "JSON object"},
	{"true", "true", "JSON object"},
	{"truncated object", `{"a":`, ""},
	{"unquoted key", `{a:1}`, ""},
	{"single quotes", `{'a':1}`, ""},
	{"not JSON at all", "hello", "JSON object"},
}

// trailers follow a valid object and make the body invalid.
var trailers = []struct{ name, tail string }{
	{"two objects", `{}`},
	{"two objects with a space", ` {"x":1}`},
	{"trailing word", ` x`},
	{"trailing brace", `}`},
	{"trailing bracket", `]`},
	{"trailing comma", `,`},
	{"trailing number", ` 1`},
	{"trailing open brace", `{`},
	{"trailing NBSP (not JSON whitespace)", "\u00a0"},
}

// validCreate are the fields of a valid create request, without braces.
const validCreate = `"sender_id":"u-1","total_cents":100,"count":10`

// invalidCreate is a create body refused as invalid_argument, with a word
// its message must name.
type invalidCreate struct{ name, body, msg string }

var invalidCreates = []invalidCreate{
	{"sender_id missing", `{"total_cents":100,"count":1}`, "sender_id"},
	{"sender_id empty", `{"sender_id":"","total_cents":100,"count":1}`, "sender_id"},
	{"sender_id null", `{"sender_id":null,"total_cents":100,"count":1}`, "sender_id"},
	{"sender_id 65 chars", `{"sender_id":"` + strings.Repeat("a", 65) + `","total_cents":100,"count":1}`, "sender_id"},
	{"sender_id space", `{"sender_id":"u 1","total_cents":100,"count":1}`, "sender_id"},
	{"sender_id slash", `{"sender_id":"u/1","total_cents":100,"count":1}`, "sender_id"},
	{"sender_id non-ASCII", `{"sender_id":"ü","total_cents":100,"count":1}`, "sender_id"},
	{"sender_id NUL", `{"sender_id":"u\u0000","total_cents":100,"count":1}`, "sender_id"},
	{"total_cents missing", `{"sender_id":"u-1","count":1}`, "total_cents"},
	{"total_cents 0", `{"sender_id":"u-1","total_cents":0,"count":1}`, "total_cents"},
	{"total_cents negative", `{"sender_id":"u-1","total_cents":-5,"count":1}`, "total_cents"},
	{"total_cents over max", `{"sender_id":"u-1","total_cents":100000001,"count":1}`, "total_cents"},
	{"total_cents below count", `{"sender_id":"u-1","total_cents":9,"count":10}`, "total_cents"},
	{"count missing", `{"sender_id":"u-1","total_cents":100}`, "count"},
	{"count 0", `{"sender_id":"u-1","total_cents":100,"count":0}`, "count"},
	{"count negative", `{"sender_id":"u-1","total_cents":100,"count":-1}`, "count"},
	{"count over max", `{"sender_id":"u-1","total_cents":100000000,"count":100001}`, "count"},
	{"expires_in_seconds 0", `{` + validCreate + `,"expires_in_seconds":0}`, "expires_in_seconds"},
	{"expires_in_seconds negative", `{` + validCreate + `,"expires_in_seconds":-1}`, "expires_in_seconds"},
	{"expires_in_seconds over 7 days", `{` + validCreate + `,"expires_in_seconds":604801}`, "expires_in_seconds"},
	{"unknown field", `{` + validCreate + `,"colour":"red"}`, "colour"},
	{"share_code is not an input", `{` + validCreate + `,"share_code":"123"}`, "share_code"},
	{"count as string", `{"sender_id":"u-1","total_cents":100,"count":"10"}`, "count"},
	{"count as bool", `{"sender_id":"u-1","total_cents":100,"count":true}`, "count"},
	{"count fractional", `{"sender_id":"u-1","total_cents":100,"count":1.5}`, "count"},
	{"count exponent", `{"sender_id":"u-1","total_cents":100,"count":1e1}`, "count"},
	{"count overflows int64", `{"sender_id":"u-1","total_cents":100,"count":99999999999999999999}`, "count"},
	{"total_cents as string", `{"sender_id":"u-1","total_cents":"100","count":1}`, "total_cents"},
	{"sender_id as number", `{"sender_id":5,"total_cents":100,"count":1}`, "sender_id"},
	{"expires_in_seconds as string", `{` + validCreate + `,"expires_in_seconds":"60"}`, "expires_in_seconds"},
	{"body over 256 KiB", padded(validCreate, maxCreateBody+1), "larger"},
	{"leading NBSP (not JSON whitespace)", "\u00a0{" + validCreate + "}", "JSON object"},
	// Each field has one spelling and is given once: another parser
	// (a gateway, the campaign backend) must not read other money.
	{"duplicate total_cents (the last would win)", `{"sender_id":"a","total_cents":1000,"count":10,"total_cents":50000}`, "total_cents"},
	{"duplicate with the same value", `{` + validCreate + `,"count":10}`, "count"},
	{"duplicate spelled with an escape", `{` + validCreate + `,"c\u006funt":5}`, "count"},
	{"name in upper case", `{"SENDER_ID":"u-1","total_cents":100,"count":10}`, "SENDER_ID"},
	{"name in mixed case", `{"sender_id":"u-1","Total_Cents":100,"count":10}`, "Total_Cents"},
	{"case variant beside the field", `{` + validCreate + `,"Count":50}`, "Count"},
	{"long s (U+017F), which folds to s", "{\"\u017fender_id\":\"alice\",\"total_cents\":100,\"count\":10}", "\u017fender_id"},
	{"long s written as an escape", `{"\u017fender_id":"alice","total_cents":100,"count":10}`, "\u017fender_id"},
	{"invalid UTF-8 in a string", "{\"sender_id\":\"u-1\xff\",\"total_cents\":100,\"count\":10}", ""},
}

func TestCreateInvalidArgument(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	cases := append([]invalidCreate(nil), invalidCreates...)
	for _, b := range badBodies {
		cases = append(cases, invalidCreate{b.name, b.body, b.msg})
	}
	for _, tr := range trailers {
		cases = append(cases, invalidCreate{tr.name, `{` + validCreate + `}` + tr.tail, ""})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := c.do("POST", "/v1/envelopes", tc.body)
			msg := requireError(t, a, http.StatusBadRequest, "invalid_argument")
			if !strings.Contains(msg, tc.msg) {
				t.Errorf("message %q does not name %q", msg, tc.msg)
			}
			// No subtest creates anything, so the table must still be empty.
			if n := envelopeRows(t, s); n != 0 {
				t.Errorf("envelopes table has %d rows after a rejected create, want 0", n)
			}
		})
	}
}

func TestGrabInvalidArgument(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	env := c.createN(500, 5, 3600)
	type tc struct{ name, body, msg string }
	cases := []tc{
		{"user_id missing", `{}`, "user_id"},
		{"user_id empty", `{"user_id":""}`, "user_id"},
		{"user_id null", `{"user_id":null}`, "user_id"},
		{"user_id 65 chars", `{"user_id":"` + strings.Repeat("u", 65) + `"}`, "user_id"},
		{"user_id space", `{"user_id":"a b"}`, "user_id"},
		{"user_id star", `{"user_id":"a*"}`, "user_id"},
		{"user_id non-ASCII", `{"user_id":"用户"}`, "user_id"},
		{"user_id as number", `{"user_id":42}`, "user_id"},
		{"user_id as object", `{"user_id":{"id":"a"}}`, "user_id"},
		{"unknown field", `{"user_id":"u-1","amount":5}`, "amount"},
		{"body over 64 KiB", padded(`"user_id":"u-1"`, maxBody+1), "larger"},
		{"name in upper case", `{"USER_ID":"dave"}`, "USER_ID"},
		{"name in mixed case", `{"User_Id":"dave"}`, "User_Id"},
		{"long s (U+017F), which folds to s", "{\"u\u017fer_id\":\"dave\"}", "u\u017fer_id"},
		{"long s written as an escape", `{"u\u017fer_id":"dave"}`, "u\u017fer_id"},
		{"case variant beside the field", `{"user_id":"dave","USER_ID":"erin"}`, "USER_ID"},
		{"duplicate user_id", `{"user_id":"dave","user_id":"erin"}`, "user_id"},
		{"duplicate with the same value", `{"user_id":"dave","user_id":"dave"}`, "user_id"},
		{"duplicate spelled with an escape", `{"user_id":"dave","user\u005fid":"erin"}`, "user_id"},
		{"duplicate after a space", `{"user_id": "dave", "user_id": "erin"}`, "user_id"},
	}
	for _, b := range badBodies {
		cases = append(cases, tc{b.name, b.body, b.msg})
	}
	for _, tr := range trailers {
		cases = append(cases, tc{tr.name, `{"user_id":"u-1"}` + tr.tail, ""})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := c.do("POST", grabPath(env.EnvelopeID), tc.body)
			msg := requireError(t, a, http.StatusBadRequest, "invalid_argument")
			if !strings.Contains(msg, tc.msg) {
				t.Errorf("message %q does not name %q", msg, tc.msg)
			}
			// No subtest grabs anything, so nothing may be gone.
			if st := c.status(env.EnvelopeID); st.RemainingCount != 5 || st.GrabbedCount != 0 || st.GrabbedCents != 0 {
				t.Errorf("after a rejected grab: remaining %d, grabbed %d (%d cents), want 5, 0 (0)",
					st.RemainingCount, st.GrabbedCount, st.GrabbedCents)
			}
		})
	}
}

func TestEnvelopeIDInvalidArgument(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	env := c.createN(100, 1, 3600)
	id := fmt.Sprint(env.EnvelopeID)
	// An id has one spelling: "+1001" or "01001" is not envelope 1001.
	for _, id := range []string{"abc", "0", "-1", "00", "1.5", "1e3", "0x10", "%201",
		"99999999999999999999", "9223372036854775808", "-9223372036854775808",
		"+" + id, "0" + id, "00" + id, "%2B" + id, id + "%20", "0001", "+0", "-0", "1_000", "%EF%BC%91"} {
		for _, r := range []struct{ method, path, body string }{
			{"GET", "/v1/envelopes/" + id, ""},
			{"POST", "/v1/envelopes/" + id + "/grab", `{"user_id":"u-1"}`},
		} {
			t.Run(r.method+" "+r.path, func(t *testing.T) {
				t.Parallel()
				msg := requireError(t, c.do(r.method, r.path, r.body), http.StatusBadRequest, "invalid_argument")
				if !strings.Contains(msg, "envelope_id") {
					t.Errorf("message %q does not name envelope_id", msg)
				}
			})
		}
	}
	t.Cleanup(func() {
		if st := c.status(env.EnvelopeID); st.RemainingCount != 1 {
			t.Errorf("remaining %d after refused grabs, want 1", st.RemainingCount)
		}
	})
}

func TestUnauthenticated(t *testing.T) {
	t.Parallel()
	s, c := newAuthClient(t)
	for _, tc := range []struct{ name, auth string }{
		{"missing header", ""},
		{"wrong token", "Bearer not-the-token"},
		{"token prefix", "Bearer " + testToken[:len(testToken)-1]},
		{"token with suffix", "Bearer " + testToken + "x"},
		{"empty bearer", "Bearer "},
		{"bare scheme", "Bearer"},
		{"token without scheme", testToken},
		{"basic scheme", "Basic dXNlcjpzM2NyZXQtdG9rZW4="},
		{"basic scheme with the token", "Basic " + testToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkUnauthenticatedRoutes(t, c, tc.auth)
			if n := envelopeRows(t, s); n != 0 {
				t.Errorf("envelopes table has %d rows after unauthenticated creates, want 0", n)
			}
		})
	}
	t.Run("probes need no token", func(t *testing.T) {
		t.Parallel()
		for _, p := range []string{"/healthz", "/readyz"} {
			if a := c.do("GET", p, ""); a.Status != http.StatusOK {
				t.Errorf("GET %s without a token: %s, want 200", p, a)
			}
		}
	})
	t.Run("right token passes", func(t *testing.T) {
		t.Parallel()
		// Its own stack: the other subtests require an empty envelopes table.
		_, c := newAuthClient(t)
		c.token = testToken
		// An id no envelope has: past auth, the answer is not_found.
		requireError(t, c.do("GET", "/v1/envelopes/999999999", ""), http.StatusNotFound, "not_found")
		env := c.create(`{"sender_id":"token-holder","total_cents":100,"count":1}`)
		if g := c.grab(env.EnvelopeID, "u-1"); g.AmountCents != 100 {
			t.Errorf("grab with the token: amount %d, want 100", g.AmountCents)
		}
	})
}

// checkUnauthenticatedRoutes: with the Authorization header auth ("" for
// none), every route, unknown ones too, answers 401 unauthenticated with
// the bearer challenge.
func checkUnauthenticatedRoutes(t *testing.T, c client, auth string) {
	t.Helper()
	h := map[string]string{}
	if auth != "" {
		h["Authorization"] = auth
	}
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/envelopes", `{"sender_id":"u-1","total_cents":100,"count":1}`},
		{"GET", "/v1/envelopes/1001", ""},
		{"POST", "/v1/envelopes/1001/grab", `{"user_id":"u-1"}`},
		{"GET", "/v1/no-such-route", ""},
	} {
		a := c.doHeaders(r.method, r.path, r.body, h)
		requireError(t, a, http.StatusUnauthorized, "unauthenticated")
		// RFC 6750 3: the challenge names the scheme; an error
		// only when a bearer token was sent.
		want := `Bearer realm="redpacket"`
		if strings.HasPrefix(strings.ToLower(auth), "bearer ") {
			want += `, error="invalid_token"`
		}
		if got := a.Header.Values("WWW-Authenticate"); len(got) != 1 || !strings.HasPrefix(got[0], want) {
			t.Errorf("%s %s: WWW-Authenticate %q, want one starting %q", r.method, r.path, got, want)
		}
	}
}

// The scheme's name is case-insensitive (RFC 9110 11.1); the token is not.
func TestBearerSchemeAnyCase(t *testing.T) {
	t.Parallel()
	_, c := newAuthClient(t)
	for _, auth := range []string{"bearer " + testToken, "BEARER " + testToken, "bEaReR " + testToken,
		"Bearer  " + testToken} {
		// An id no envelope has: past auth, the answer is not_found.
		a := c.doHeaders("GET", "/v1/envelopes/999999999", "", map[string]string{"Authorization": auth})
		requireError(t, a, http.StatusNotFound, "not_found")
	}
	for _, auth := range []string{"bearer " + strings.ToUpper(testToken), "Bearer\t" + testToken, "Bearer:" + testToken,
		"Bearers " + testToken} {
		a := c.doHeaders("GET", "/v1/envelopes/999999999", "", map[string]string{"Authorization": auth})
		requireError(t, a, http.StatusUnauthorized, "unauthenticated")
	}
}

// A query string that does not parse is refused whole, never read in part
// (url.Values would drop the bad pair and serve the rest).
func TestMalformedQuery(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	env := c.createN(100, 1, 3600)
	for _, q := range []string{"?x=3%zz", "?x=3;", "?x=1;y=2", "?x=%", "?%zz=1"} {
		for _, r := range []struct{ method, path, body string }{
			{"POST", grabPath(env.EnvelopeID) + q, `{"user_id":"u-1"}`},
			{"GET", statusPath(env.EnvelopeID) + q, ""},
			{"POST", "/v1/envelopes" + q, `{"sender_id":"u-1","total_cents":5,"count":5}`},
		} {
			msg := requireError(t, c.do(r.method, r.path, r.body), http.StatusBadRequest, "invalid_argument")
			if !strings.Contains(msg, "query") {
				t.Errorf("%s %s: message %q does not name the query", r.method, r.path, msg)
			}
		}
	}
	if st := c.status(env.EnvelopeID); st.RemainingCount != 1 {
		t.Errorf("remaining %d after refused grabs, want 1", st.RemainingCount)
	}
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	env := c.createN(100, 1, 3600)
	missing := env.EnvelopeID + 1_000_000
	// A grab of a missing envelope creates nothing for it.
	requireError(t, c.grabAnswer(missing, "u-1"), http.StatusNotFound, "not_found")
	requireError(t, c.do("GET", statusPath(missing), ""), http.StatusNotFound, "not_found")
	for _, r := range []struct{ method, path, body string }{
		{"POST", grabPath(missing), `{"user_id":"u-1"}`},
		{"GET", statusPath(missing), ""},
		{"GET", statusPath(1), ""},
		{"GET", statusPath(9007199254740991), ""},
		{"GET", "/", ""},
		{"GET", "/nope", ""},
		{"GET", "/v1", ""},
		{"GET", "/v1/", ""},
		{"GET", "/v1/nope", ""},
		{"POST", "/v1/envelopes/", `{}`},
		{"GET", statusPath(env.EnvelopeID) + "/", ""},
		{"POST", grabPath(env.EnvelopeID) + "/x", `{"user_id":"u-1"}`},
		{"GET", "/metricsx", ""},
		// Paths that are not clean get the JSON answer, not ServeMux's redirect.
		{"GET", "/v1//envelopes", ""},
		{"POST", "/v1/envelopes/../envelopes", `{"sender_id":"u-1","total_cents":5,"count":5}`},
		{"POST", "/v1/envelopes/./" + fmt.Sprint(env.EnvelopeID) + "/grab", `{"user_id":"u-1"}`},
		{"GET", "/v1/envelopes/%2e%2e", ""},
		{"GET", "//healthz", ""},
		{"GET", "/x/../healthz", ""},
	} {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			t.Parallel()
			requireError(t, c.do(r.method, r.path, r.body), http.StatusNotFound, "not_found")
		})
	}
}

func TestMethodNotAllowed(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	env := c.createN(100, 1, 3600)
	for _, r := range []struct{ method, path, allow string }{
		{"DELETE", "/v1/envelopes/1", "GET, HEAD"},
		{"DELETE", statusPath(env.EnvelopeID), "GET, HEAD"},
		{"PUT", statusPath(env.EnvelopeID), "GET, HEAD"},
		{"PATCH", statusPath(env.EnvelopeID), "GET, HEAD"},
		{"POST", statusPath(env.EnvelopeID), "GET, HEAD"},
		{"GET", "/v1/envelopes", "POST"},
		{"PUT", "/v1/envelopes", "POST"},
		{"DELETE", "/v1/envelopes", "POST"},
		{"GET", grabPath(env.EnvelopeID), "POST"},
		{"PUT", grabPath(env.EnvelopeID), "POST"},
		{"POST", "/v1/envelopes/by-code/26112100000", "GET, HEAD"},
		{"GET", "/v1/users/u-1/short-id", "POST"},
		{"POST", "/v1/events", "GET, HEAD"},
		{"POST", "/healthz", "GET, HEAD"},
		{"DELETE", "/readyz", "GET, HEAD"},
		{"POST", "/metrics", "GET, HEAD"},
		{"OPTIONS", "/v1/envelopes", "POST"},
	} {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			t.Parallel()
			a := c.do(r.method, r.path, `{"user_id":"u-1"}`)
			msg := requireError(t, a, http.StatusMethodNotAllowed, "method_not_allowed")
			if !strings.Contains(msg, r.method) {
				t.Errorf("message %q does not name the method %s", msg, r.method)
			}
			// RFC 9110 15.5.6: a 405 lists the methods the path serves.
			if got := a.Header.Get("Allow"); got != r.allow {
				t.Errorf("Allow: %q, want %q", got, r.allow)
			}
		})
	}
	// None of those took the only packet.
	if st := c.status(env.EnvelopeID); st.RemainingCount != 1 {
		t.Errorf("remaining %d after rejected methods, want 1", st.RemainingCount)
	}
}

func TestSoldOut(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	env := c.createN(77, 1, 3600)
	first := c.grab(env.EnvelopeID, "user-a")
	if first.Repeat || first.AmountCents != 77 {
		t.Fatalf("first grab: %+v, want amount 77, repeat false", first)
	}
	requireError(t, c.grabAnswer(env.EnvelopeID, "user-b"), http.StatusConflict, "sold_out")
	again := c.grab(env.EnvelopeID, "user-a")
	if !again.Repeat {
		t.Errorf("user-a again: repeat false, want true")
	}
	if again.PacketID != first.PacketID || again.AmountCents != first.AmountCents ||
		again.GrabbedAt != first.GrabbedAt || again.EnvelopeID != first.EnvelopeID {
		t.Errorf("user-a again: %+v, want the first answer %+v", again, first)
	}
	// user-b's failed attempt took nothing and is still refused.
	requireError(t, c.grabAnswer(env.EnvelopeID, "user-b"), http.StatusConflict, "sold_out")
	st := c.status(env.EnvelopeID)
	if st.GrabbedCount != 1 || st.GrabbedCents != 77 || st.RemainingCount != 0 || st.Status != "sold_out" {
		t.Errorf("status after selling out: %+v", st)
	}
}

func TestExpired(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	env := c.createN(1000, 10, 60)
	first := c.grab(env.EnvelopeID, "holder")
	expiresAt := parseTime(t, "expires_at", env.ExpiresAt)
	setClock(s, expiresAt.Add(time.Millisecond))

	requireError(t, c.grabAnswer(env.EnvelopeID, "newcomer"), http.StatusConflict, "expired")
	again := c.grab(env.EnvelopeID, "holder")
	if !again.Repeat || again.PacketID != first.PacketID || again.AmountCents != first.AmountCents ||
		again.GrabbedAt != first.GrabbedAt {
		t.Errorf("holder after expiry: %+v, want the repeat of %+v", again, first)
	}
	st := c.status(env.EnvelopeID)
	if st.Status != "expired" || st.GrabbedCount != 1 || st.RemainingCount != 9 || st.GrabbedCents != first.AmountCents {
		t.Errorf("status after expiry: %+v", st)
	}
}

func TestUnavailableWhileLoading(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	// Far above what the test's sequences hand out.
	const id, firstPacket = 7_000_000_001, 9_000_000_000_001
	now := s.Clock.Now().UTC().Truncate(time.Millisecond)
	err := s.PG.InsertEnvelope(context.Background(), pgstore.Envelope{
		ID: id, Shard: s.Redis.Keys().Shard(id), SenderID: "u-1", TotalCents: 300, Count: 3,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour),
	}, firstPacket, []int64{100, 100, 100})
	if err != nil {
		t.Fatalf("insert loading envelope: %v", err)
	}
	for _, user := range []string{"user-a", "user-b", "user-a"} {
		requireError(t, c.grabAnswer(id, user), http.StatusServiceUnavailable, "unavailable")
	}
	st := c.status(id)
	if st.Status != "loading" || st.GrabbedCount != 0 || st.GrabbedCents != 0 {
		t.Errorf("status of a loading envelope: %+v", st)
	}
	// The refused grabs left nothing in PostgreSQL either.
	var claimed int
	if err := s.Pool.QueryRow(context.Background(),
		"SELECT count(*) FROM packets WHERE envelope_id = $1 AND claimed_by IS NOT NULL", id).Scan(&claimed); err != nil {
		t.Fatal(err)
	}
	if claimed != 0 {
		t.Errorf("%d packets claimed in PostgreSQL, want 0", claimed)
	}
	if e, err := s.PG.Envelope(context.Background(), id); err != nil || e.Status != "loading" {
		t.Errorf("envelope after refused grabs: %+v, %v; want still loading", e, err)
	}
}

func TestUnavailableWhileSuspended(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	env := c.createN(1000, 10, 60)
	first := c.grab(env.EnvelopeID, "holder")
	ctx := context.Background()
	// Suspended in Redis first, then in PostgreSQL, as the flusher does.
	if _, err := s.Redis.Suspend(ctx, env.EnvelopeID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PG.Suspend(ctx, env.EnvelopeID, "test", s.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	requireError(t, c.grabAnswer(env.EnvelopeID, "newcomer"), http.StatusServiceUnavailable, "unavailable")
	// A holder's repeat is still answered while Redis holds the claims.
	if again := c.grab(env.EnvelopeID, "holder"); !again.Repeat || again.PacketID != first.PacketID {
		t.Errorf("holder while suspended: %+v, want the repeat of %+v", again, first)
	}
	// A suspended envelope's counts are PostgreSQL's (the grab is not
	// flushed yet): Redis may have lost part of its state.
	if st := c.status(env.EnvelopeID); st.Status != "suspended" || st.GrabbedCount != 0 {
		t.Errorf("status while suspended: %+v", st)
	}
	// Redis lost everything: still 503, and nothing is offered.
	if err := s.Redis.Forget(ctx, env.EnvelopeID, 10, time.Hour); err != nil {
		t.Fatal(err)
	}
	requireError(t, c.grabAnswer(env.EnvelopeID, "newcomer"), http.StatusServiceUnavailable, "unavailable")
	if n, _ := s.RDB.Exists(ctx, s.Redis.Keys().Pool(env.EnvelopeID)).Result(); n != 0 {
		t.Error("a grab of a suspended envelope recreated its pool")
	}
}
