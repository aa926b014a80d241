package httpapi_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"redpacket/internal/flush"
	"redpacket/internal/httpapi"
	"redpacket/internal/testenv/stack"
)

type claim struct {
	UserID      string `json:"user_id"`
	PacketID    int64  `json:"packet_id"`
	AmountCents int64  `json:"amount_cents"`
	OrderNo     string `json:"order_no"`
	GrabbedAt   string `json:"grabbed_at"`
}

type claimsPage struct {
	Claims    []claim `json:"claims"`
	NextAfter string  `json:"next_after"`
	Best      *claim  `json:"best"`
}

// flushAll writes every granted claim to PostgreSQL and settles what is
// due (sold-out envelopes at once), as the flusher does within a second.
func flushAll(t *testing.T, s *stack.Stack) {
	t.Helper()
	f := flush.New(s.Redis, s.PG, flush.Config{KeyTTL: time.Hour}, zaptest.NewLogger(t))
	if err := f.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func settleAll(t *testing.T, s *stack.Stack) {
	t.Helper()
	f := flush.New(s.Redis, s.PG, flush.Config{KeyTTL: time.Hour}, zaptest.NewLogger(t))
	if err := f.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := f.Settle(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// claimsOf pages through an envelope's claims, limit at a time.
func (c client) claimsOf(id int64, limit int) ([]claim, claimsPage) {
	c.t.Helper()
	var all []claim
	after := ""
	for range 1000 {
		q := url.Values{"limit": {fmt.Sprint(limit)}}
		if after != "" {
			q.Set("after", after)
		}
		a := c.do("GET", fmt.Sprintf("/v1/envelopes/%d/claims?%s", id, q.Encode()), "")
		if a.Status != http.StatusOK {
			c.t.Fatalf("claims of %d: %s", id, a)
		}
		requireKeys(c.t, a, "claims", "next_after", "best")
		var p claimsPage
		requireJSON(c.t, a, &p)
		if p.NextAfter == "" {
			c.t.Fatalf("next_after missing: %s", a)
		}
		all = append(all, p.Claims...)
		if len(p.Claims) < limit {
			return all, p
		}
		after = p.NextAfter
	}
	c.t.Fatal("claims list does not end")
	return nil, claimsPage{}
}

// luckiest is the largest amount, the first handed out on a tie.
func luckiest(handedOut []claim) claim {
	best := handedOut[0]
	for _, c := range handedOut[1:] {
		if c.AmountCents > best.AmountCents {
			best = c
		}
	}
	return best
}

func TestClaimsListInHandOutOrder(t *testing.T) {
	t.Parallel()
	for name, build := range map[string]func(testing.TB) *stack.Stack{"redis": stack.New, "cluster": stack.NewCluster} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := build(t)
			c := client{t: t, h: httpapi.New(s.Svc, httpapi.Options{})}
			// Small amounts, so ties for the luckiest grab are likely.
			e := c.createN(80, 40, 3600)
			grants := grabConcurrently(t, c, e.EnvelopeID, 60)
			if len(grants) != 40 {
				t.Fatalf("%d grants of 40 packets", len(grants))
			}
			// The shard numbers its grants in the order it hands them out.
			slices.SortFunc(grants, func(a, b claim) int { return cmpOrderNo(a.OrderNo, b.OrderNo) })

			if st := c.status(e.EnvelopeID); st.Best != nil {
				t.Errorf("best before the claims are durable: %+v", st.Best)
			}
			flushAll(t, s)
			for _, limit := range []int{1, 7, 40, 1000} {
				got, last := c.claimsOf(e.EnvelopeID, limit)
				if !slices.Equal(got, grants) {
					t.Fatalf("limit %d: claims list\n%v\nhanded out\n%v", limit, got, grants)
				}
				if want := luckiest(grants); last.Best == nil || *last.Best != want {
					t.Errorf("best = %+v, want %+v", last.Best, want)
				}
			}
			want := luckiest(grants)
			if st := c.status(e.EnvelopeID); st.Status != "sold_out" || st.Best == nil || *st.Best != want {
				t.Errorf("status %s best %+v, want sold_out with %+v", st.Status, st.Best, want)
			}
			settleAll(t, s)
			if st := c.status(e.EnvelopeID); st.Status != "settled" || st.Best == nil || *st.Best != want {
				t.Errorf("status %s best %+v, want settled with %+v", st.Status, st.Best, want)
			}
			checkBestInEvents(t, s, e.EnvelopeID, want)
		})
	}
}

// grabConcurrently has users user-00 and on grab envelope id all at once
// and returns the grants they were answered.
func grabConcurrently(t *testing.T, c client, id int64, users int) []claim {
	grants := make([]claim, users)
	var wg sync.WaitGroup
	for i := range grants {
		wg.Go(func() {
			a := c.grabAnswer(id, fmt.Sprintf("user-%02d", i))
			if a.Status == http.StatusOK {
				var g grabResponse
				requireJSON(t, a, &g)
				grants[i] = claim{UserID: fmt.Sprintf("user-%02d", i), PacketID: g.PacketID,
					AmountCents: g.AmountCents, OrderNo: g.OrderNo, GrabbedAt: g.GrabbedAt}
			}
		})
	}
	wg.Wait()
	return slices.DeleteFunc(grants, func(g claim) bool { return g.PacketID == 0 })
}

// checkBestInEvents: the envelope's sold-out and settled events name want
// as the luckiest grab.
func checkBestInEvents(t *testing.T, s *stack.Stack, id int64, want claim) {
	t.Helper()
	for _, typ := range []string{"envelope.sold_out", "envelope.settled"} {
		var data []byte
		if err := s.Pool.QueryRow(t.Context(), `SELECT data FROM event_messages WHERE envelope_id = $1 AND type = $2`,
			id, typ).Scan(&data); err != nil {
			t.Fatalf("%s event: %v", typ, err)
		}
		var ev struct {
			Best *claim `json:"best"`
		}
		if err := json.Unmarshal(data, &ev); err != nil || ev.Best == nil || *ev.Best != want {
			t.Errorf("%s event best = %+v (%s), want %+v", typ, ev.Best, data, want)
		}
	}
}

// cmpOrderNo orders order numbers of one day: same width, so as strings.
func cmpOrderNo(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestClaimsListBeforeTheEnd(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	e := c.createN(1000, 5, 3600)
	empty, p := c.claimsOf(e.EnvelopeID, 10)
	if len(empty) != 0 || p.Best != nil {
		t.Fatalf("claims of an untouched envelope: %v best %v", empty, p.Best)
	}
	// The cursor of an empty page polls for the first claims.
	first := c.grab(e.EnvelopeID, "a")
	c.grab(e.EnvelopeID, "b")
	flushAll(t, s)
	a := c.do("GET", fmt.Sprintf("/v1/envelopes/%d/claims?after=%s&limit=1", e.EnvelopeID, p.NextAfter), "")
	var page claimsPage
	requireJSON(t, a, &page)
	if len(page.Claims) != 1 || page.Claims[0].PacketID != first.PacketID || page.Best != nil {
		t.Fatalf("first claim from the empty page's cursor: %s", a)
	}
	// Later grants come after the last claim listed.
	c.grab(e.EnvelopeID, "c")
	flushAll(t, s)
	a = c.do("GET", fmt.Sprintf("/v1/envelopes/%d/claims?after=%s", e.EnvelopeID, page.NextAfter), "")
	requireJSON(t, a, &page)
	if len(page.Claims) != 2 || page.Claims[0].UserID != "b" || page.Claims[1].UserID != "c" || page.Best != nil {
		t.Fatalf("claims after the first: %s", a)
	}
}

func TestClaimsListRefusals(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	e := c.createN(1000, 5, 3600)
	other := c.createN(1000, 5, 3600)
	_, p := c.claimsOf(other.EnvelopeID, 10)
	base := fmt.Sprintf("/v1/envelopes/%d/claims", e.EnvelopeID)
	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x", "?limit=1&limit=2", "?after=", "?after=zzz",
		"?after=" + p.NextAfter, "?before=abc", "?page=2"} {
		requireError(t, c.do("GET", base+q, ""), http.StatusBadRequest, "invalid_argument")
	}
	requireError(t, c.do("GET", "/v1/envelopes/999999/claims", ""), http.StatusNotFound, "not_found")
	requireError(t, c.do("POST", base, ""), http.StatusMethodNotAllowed, "method_not_allowed")
}

type userClaim struct {
	EnvelopeID  int64  `json:"envelope_id"`
	SenderID    string `json:"sender_id"`
	PacketID    int64  `json:"packet_id"`
	AmountCents int64  `json:"amount_cents"`
	OrderNo     string `json:"order_no"`
	GrabbedAt   string `json:"grabbed_at"`
}

func TestHistoriesNewestFirst(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	want, envelopes := walkerGrabsFromTwoSenders(s, c)
	flushAll(t, s)
	slices.Reverse(want)
	slices.Reverse(envelopes)

	if got := userClaimPages(t, c); !slices.Equal(got, want) {
		t.Fatalf("user's claims\n%v\nwant newest first\n%v", got, want)
	}
	if ids := senderZeroEnvelopePages(t, c); !slices.Equal(ids, envelopes) {
		t.Errorf("sender's envelopes %v, want newest first %v", ids, envelopes)
	}

	for _, path := range []string{"/v1/users/nobody/claims", "/v1/senders/nobody/envelopes"} {
		if a := c.do("GET", path, ""); a.Status != http.StatusOK || string(a.Body) == "" {
			t.Errorf("%s: %s", path, a)
		} else if k := keys(t, a); len(k) != 2 {
			t.Errorf("%s: %s", path, a)
		}
	}
	for _, path := range []string{"/v1/users/walker/claims?before=x", "/v1/users/walker/claims?limit=1001",
		"/v1/senders/sender-0/envelopes?limit=101", "/v1/senders/sender-0/envelopes?after=1",
		"/v1/users/" + url.PathEscape("bad user") + "/claims"} {
		requireError(t, c.do("GET", path, ""), http.StatusBadRequest, "invalid_argument")
	}
	// A cursor of one list is not one of the other.
	a := c.do("GET", "/v1/users/walker/claims?limit=1", "")
	var p userClaimsPage
	requireJSON(t, a, &p)
	requireError(t, c.do("GET", "/v1/senders/sender-0/envelopes?before="+*p.NextBefore, ""),
		http.StatusBadRequest, "invalid_argument")
	// Times no list holds, which PostgreSQL could not take either.
	for _, us := range []string{"-999999999999999999", "-1", "253402300800000000", "9223372036854775807", "-9223372036854775808"} {
		cursor := base64.RawURLEncoding.EncodeToString([]byte("1:s:" + us + ":5"))
		requireError(t, c.do("GET", "/v1/senders/sender-0/envelopes?before="+cursor, ""), http.StatusBadRequest, "invalid_argument")
	}
	_ = context.Background
}

// A user's history is by envelope, newest envelope first: a packet of an
// older envelope grabbed after a newer one's is listed under its envelope.
// A cursor given out while histories were by grab time (a time and a
// packet) is refused: going on from it by envelope skipped the claims
// grabbed earlier in newer envelopes.
func TestHistoryIsByEnvelope(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	older := c.create(`{"sender_id":"s","total_cents":500,"count":5}`)
	newer := c.create(`{"sender_id":"s","total_cents":500,"count":5}`)
	gNewer := c.grab(newer.EnvelopeID, "late")
	s.Clock.Advance(time.Second)
	gOlder := c.grab(older.EnvelopeID, "late")
	flushAll(t, s)

	var p userClaimsPage
	requireJSON(t, c.do("GET", "/v1/users/late/claims", ""), &p)
	if len(p.Claims) != 2 || p.Claims[0].PacketID != gNewer.PacketID || p.Claims[1].PacketID != gOlder.PacketID {
		t.Fatalf("history %+v; want the newer envelope's packet %d, then the older's %d", p.Claims, gNewer.PacketID, gOlder.PacketID)
	}
	// The cursor a build listing by grab time gave after the older
	// envelope's claim (grabbed last): the newer's, grabbed before it,
	// would never be listed from there.
	legacy := base64.RawURLEncoding.EncodeToString(
		fmt.Appendf(nil, "1:u:%d:%d", time.Now().UnixMicro(), gOlder.PacketID))
	requireError(t, c.do("GET", "/v1/users/late/claims?before="+legacy, ""), http.StatusBadRequest, "invalid_argument")
	for _, bad := range []string{"1:h:0", "1:h:", "1:h:x", "1:h:-5", "1:h:5:6", "2:h:5", "1:s:5"} {
		cursor := base64.RawURLEncoding.EncodeToString([]byte(bad))
		requireError(t, c.do("GET", "/v1/users/late/claims?before="+cursor, ""), http.StatusBadRequest, "invalid_argument")
	}
}

type userClaimsPage struct {
	Claims     []userClaim `json:"claims"`
	NextBefore *string     `json:"next_before"`
}

// walkerGrabsFromTwoSenders: "walker" grabs one packet from each of 7
// envelopes of sender-0 and sender-1 in turn, some a second apart and some
// in the same millisecond. It returns walker's claims and sender-0's
// envelopes, oldest first.
func walkerGrabsFromTwoSenders(s *stack.Stack, c client) ([]userClaim, []int64) {
	var want []userClaim
	var envelopes []int64
	for i := range 7 {
		sender := fmt.Sprintf("sender-%d", i%2)
		e := c.create(fmt.Sprintf(`{"sender_id":%q,"total_cents":500,"count":5}`, sender))
		if i%3 != 2 {
			s.Clock.Advance(time.Second) // and some in the same millisecond
		}
		g := c.grab(e.EnvelopeID, "walker")
		want = append(want, userClaim{EnvelopeID: e.EnvelopeID, SenderID: sender, PacketID: g.PacketID,
			AmountCents: g.AmountCents, OrderNo: g.OrderNo, GrabbedAt: g.GrabbedAt})
		if i%2 == 0 {
			envelopes = append(envelopes, e.EnvelopeID)
		}
	}
	return want, envelopes
}

// userClaimPages reads walker's claims three to a page, following the
// cursor to the end.
func userClaimPages(t *testing.T, c client) []userClaim {
	t.Helper()
	var got []userClaim
	before := ""
	for {
		path := "/v1/users/walker/claims?limit=3"
		if before != "" {
			path += "&before=" + before
		}
		a := c.do("GET", path, "")
		var p userClaimsPage
		requireKeys(t, a, "claims", "next_before")
		requireJSON(t, a, &p)
		got = append(got, p.Claims...)
		if p.NextBefore == nil {
			break
		}
		before = *p.NextBefore
	}
	return got
}

// senderZeroEnvelopePages reads sender-0's envelopes two to a page,
// following the cursor to the end; each must be sender-0's, open, with
// walker's one grab.
func senderZeroEnvelopePages(t *testing.T, c client) []int64 {
	t.Helper()
	var ids []int64
	before := ""
	for {
		path := "/v1/senders/sender-0/envelopes?limit=2"
		if before != "" {
			path += "&before=" + before
		}
		a := c.do("GET", path, "")
		var p struct {
			Envelopes  []statusResponse `json:"envelopes"`
			NextBefore *string          `json:"next_before"`
		}
		requireJSON(t, a, &p)
		for _, st := range p.Envelopes {
			if st.SenderID != "sender-0" || st.GrabbedCount != 1 || st.Status != "open" {
				t.Errorf("envelope in the sender's list: %+v", st)
			}
			ids = append(ids, st.EnvelopeID)
		}
		if p.NextBefore == nil {
			break
		}
		before = *p.NextBefore
	}
	return ids
}

// A claim recorded without its order number (its number was in use: a
// claim_conflicts row) is answered with order_no null wherever it is read,
// as the events feed and the contract have it, never "".
func TestClaimWithoutOrderNumberReadsNull(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	env := c.createN(100, 1, 3600)
	g := c.grab(env.EnvelopeID, "holder")
	flushAll(t, s)
	if _, err := s.Pool.Exec(t.Context(), `UPDATE claims SET order_no = NULL WHERE packet_id = $1`, g.PacketID); err != nil {
		t.Fatal(err)
	}
	// Answered from PostgreSQL, as once its keys have expired.
	if err := s.RDB.Del(t.Context(), s.Redis.Keys().Meta(env.EnvelopeID)).Err(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		fmt.Sprintf("/v1/envelopes/%d/claims", env.EnvelopeID), "/v1/users/holder/claims", statusPath(env.EnvelopeID),
	} {
		a := c.do("GET", path, "")
		if a.Status != http.StatusOK || !strings.Contains(string(a.Body), `"order_no":null`) || strings.Contains(string(a.Body), `"order_no":""`) {
			t.Errorf("%s: %s; want order_no null", path, a)
		}
	}
	a := c.do("POST", grabPath(env.EnvelopeID), `{"user_id":"holder"}`)
	if a.Status != http.StatusOK || !strings.Contains(string(a.Body), `"order_no":null`) {
		t.Errorf("the holder's repeat: %s; want its packet with order_no null", a)
	}
}
