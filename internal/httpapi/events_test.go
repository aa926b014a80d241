package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"redpacket/internal/daemon"
	"redpacket/internal/envelope"
	"redpacket/internal/events"
	"redpacket/internal/httpapi"
	"redpacket/internal/pgstore"
	"redpacket/internal/testenv/stack"
)

type eventJSON struct {
	ID         int64           `json:"id"`
	Type       string          `json:"type"`
	EnvelopeID int64           `json:"envelope_id"`
	Data       json.RawMessage `json:"data"`
	CreatedAt  string          `json:"created_at"`
}

type eventsPage struct {
	Events    []eventJSON `json:"events"`
	NextAfter *int64      `json:"next_after"`
}

// newEventsClient builds a stack and the API over it with the events feed,
// its long polls woken by a listener that runs until the test ends.
func newEventsClient(t *testing.T, token string) (*stack.Stack, client) {
	t.Helper()
	s := stack.New(t)
	l := events.NewListener(s.DBURL, zaptest.NewLogger(t))
	listening := l.Changed()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-l.Done() })
	<-listening
	api := httpapi.New(s.Svc, httpapi.Options{Token: token, Events: events.NewFeed(s.PG, l)})
	return s, client{t: t, h: api, token: token}
}

func (c client) events(query string) eventsPage {
	c.t.Helper()
	a := c.do("GET", "/v1/events"+query, "")
	if a.Status != 200 {
		c.t.Fatalf("GET /v1/events%s: %s", query, a)
	}
	requireKeys(c.t, a, "events", "next_after")
	var p eventsPage
	requireJSON(c.t, a, &p)
	if p.Events == nil || p.NextAfter == nil {
		c.t.Fatalf("GET /v1/events%s: events or next_after missing or null: %s", query, a)
	}
	return p
}

// claimAll creates an envelope of n packets and claims all of them in
// PostgreSQL, in batches of batch, as the flusher would.
func claimAll(t *testing.T, s *stack.Stack, n, batch int, pause time.Duration) int64 {
	t.Helper()
	ctx := context.Background()
	e, err := s.Svc.Create(ctx, envelope.CreateRequest{SenderID: "s", TotalCents: int64(10 * n), Count: int64(n)})
	if err != nil {
		t.Error(err)
		return 0
	}
	ids, _, err := s.PG.UnclaimedPackets(ctx, e.ID)
	if err != nil {
		t.Error(err)
		return 0
	}
	for i := 0; i < len(ids); i += batch {
		var claims []pgstore.Claim
		for _, p := range ids[i:min(i+batch, len(ids))] {
			claims = append(claims, pgstore.Claim{EnvelopeID: e.ID, PacketID: p, UserID: fmt.Sprintf("u%d", p),
				ClaimedAt: time.Now()})
		}
		if _, err := s.PG.ApplyClaims(ctx, claims); err != nil {
			t.Error(err)
			return e.ID
		}
		if pause > 0 {
			time.Sleep(rand.N(pause))
		}
	}
	return e.ID
}

func TestEventsFeed(t *testing.T) {
	t.Parallel()
	s, c := newEventsClient(t, "")
	if p := c.events(""); len(p.Events) != 0 || *p.NextAfter != 0 {
		t.Fatalf("empty feed = %+v", p)
	}
	env := claimAll(t, s, 3, 3, time.Millisecond)
	p := c.events("?after=0&limit=2")
	if len(p.Events) != 2 || *p.NextAfter != 2 || p.Events[0].ID != 1 || p.Events[1].ID != 2 {
		t.Fatalf("first page = %+v", p)
	}
	for _, e := range p.Events {
		if e.Type != "packet.claimed" || e.EnvelopeID != env || !msTimestamp.MatchString(e.CreatedAt) {
			t.Errorf("event %+v", e)
		}
		var d struct {
			EnvelopeID  int64             `json:"envelope_id"`
			PacketID    int64             `json:"packet_id"`
			UserID      string            `json:"user_id"`
			AmountCents int64             `json:"amount_cents"`
			OrderNo     *string           `json:"order_no"`
			GrabbedAt   string            `json:"grabbed_at"`
			Metadata    map[string]string `json:"metadata"`
		}
		dec := json.NewDecoder(strings.NewReader(string(e.Data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil || d.EnvelopeID != env || d.UserID != fmt.Sprintf("u%d", d.PacketID) ||
			d.AmountCents <= 0 || !msTimestamp.MatchString(d.GrabbedAt) {
			t.Errorf("packet.claimed data %s: %v", e.Data, err)
		}
	}
	p = c.events("?after=2&limit=1000&wait=0")
	if len(p.Events) != 2 || p.Events[1].Type != "envelope.sold_out" || *p.NextAfter != 4 {
		t.Fatalf("second page = %+v", p)
	}
	// At the end with a wait: nothing comes, the cursor stays.
	start := time.Now()
	if p := c.events("?after=4&wait=1"); len(p.Events) != 0 || *p.NextAfter != 4 || time.Since(start) < time.Second {
		t.Errorf("long poll at the end = %+v after %s", p, time.Since(start))
	}
}

// A long poll is answered as soon as events commit.
func TestEventsLongPoll(t *testing.T) {
	t.Parallel()
	s, c := newEventsClient(t, "")
	go func() {
		time.Sleep(300 * time.Millisecond)
		claimAll(t, s, 2, 2, 0)
	}()
	start := time.Now()
	p := c.events("?wait=20")
	if len(p.Events) != 3 || *p.NextAfter != 3 || time.Since(start) > 10*time.Second {
		t.Errorf("long poll = %+v after %s", p, time.Since(start))
	}
}

// A long poll outlasts the server's write timeout: it answers after its
// wait, however short the timeout for other answers.
func TestEventsLongPollOutlastsWriteTimeout(t *testing.T) {
	t.Parallel()
	_, c := newEventsClient(t, "")
	srv := httptest.NewUnstartedServer(c.h)
	srv.Config = daemon.NewServer(c.h, zaptest.NewLogger(t), daemon.Limits{
		ReadHeaderTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: 300 * time.Millisecond,
		IdleTimeout: time.Minute}).HTTP
	srv.Start()
	defer srv.Close()
	start := time.Now()
	resp, err := srv.Client().Get(srv.URL + "/v1/events?wait=1")
	if err != nil {
		t.Fatalf("long poll of 1 s with a write timeout of 300 ms: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), `"next_after":0`) || time.Since(start) < time.Second {
		t.Errorf("long poll: %d %s %v after %s", resp.StatusCode, body, err, time.Since(start))
	}
}

func TestEventsInvalidArgument(t *testing.T) {
	t.Parallel()
	_, c := newEventsClient(t, "")
	for _, q := range []string{
		"?after=-1", "?after=x", "?after=", "?after=9007199254740992", "?after=+1", "?after=1.0",
		"?limit=0", "?limit=1001", "?limit=ten", "?wait=31", "?wait=-1", "?wait=1s",
		"?cursor=3", "?after=1&after=2", "?limit=5&Limit=6",
	} {
		msg := requireError(t, c.do("GET", "/v1/events"+q, ""), 400, "invalid_argument")
		if !strings.Contains(msg, "after") && !strings.Contains(msg, "limit") && !strings.Contains(msg, "wait") {
			t.Errorf("%s: message %q names no parameter", q, msg)
		}
	}
	// A query that does not parse is refused, not served from cursor 0.
	for _, q := range []string{"?limit=1&after=3%zz", "?after=3;", "?limit=1;after=3", "?after=3%", "?after=%33%"} {
		msg := requireError(t, c.do("GET", "/v1/events"+q, ""), 400, "invalid_argument")
		if !strings.Contains(msg, "query") {
			t.Errorf("%s: message %q does not name the query", q, msg)
		}
	}
	requireError(t, c.do("POST", "/v1/events", "{}"), 405, "method_not_allowed")
}

func TestEventsNeedToken(t *testing.T) {
	t.Parallel()
	_, c := newEventsClient(t, testToken)
	c.token = ""
	requireError(t, c.do("GET", "/v1/events", ""), 401, "unauthenticated")
	c.token = testToken
	c.events("")
}

func TestEventsNotServed(t *testing.T) {
	t.Parallel()
	_, c := newClient(t)
	requireError(t, c.do("GET", "/v1/events", ""), 503, "unavailable")
}

// Several flushers write events at once (claims of their own envelopes in
// batches, and suspensions and reloads); a consumer long-polling the feed
// from cursor 0 meanwhile reads every event once, in order, without a gap,
// and exactly one packet.claimed per claimed packet.
func TestEventsFeedConcurrentWriters(t *testing.T) {
	t.Parallel()
	s, c := newEventsClient(t, "")
	const flushers, envelopesEach, packets = 3, 2, 40
	var wg sync.WaitGroup
	for range flushers {
		wg.Go(func() {
			for range envelopesEach {
				claimAll(t, s, packets, 1+rand.IntN(7), 2*time.Millisecond)
			}
		})
	}
	wg.Go(func() { suspendAndReopen(t, s) }) // an operator
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	seen, claimed := readWholeFeed(t, c, finished)
	var inPG, events int
	if err := s.Pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM packets WHERE claimed_by IS NOT NULL), (SELECT count(*) FROM event_messages)`).Scan(&inPG, &events); err != nil {
		t.Fatal(err)
	}
	if len(seen) != events || inPG != flushers*envelopesEach*packets || len(claimed) != inPG {
		t.Errorf("read %d events of %d; %d packets with a packet.claimed, %d claimed in PostgreSQL",
			len(seen), events, len(claimed), inPG)
	}
	for p, n := range claimed {
		if n != 1 {
			t.Errorf("packet %d: %d packet.claimed events", p, n)
		}
	}
}

// suspendAndReopen creates an envelope and suspends and reopens it ten
// times, a few milliseconds apart, as an operator would.
func suspendAndReopen(t *testing.T, s *stack.Stack) {
	e, err := s.Svc.Create(context.Background(), envelope.CreateRequest{SenderID: "s", TotalCents: 10, Count: 1})
	if err != nil {
		t.Error(err)
		return
	}
	for range 10 {
		if _, err := s.PG.Suspend(context.Background(), e.ID, "test", time.Now()); err != nil {
			t.Error(err)
		}
		if _, err := s.PG.Reopen(context.Background(), e.ID); err != nil {
			t.Error(err)
		}
		time.Sleep(rand.N(5 * time.Millisecond))
	}
}

// readWholeFeed long-polls the feed from cursor 0, checking each event is
// read once and in order, until a poll after finished is closed answers
// nothing. It returns the events read and, per packet, the packet.claimed
// events read.
func readWholeFeed(t *testing.T, c client, finished <-chan struct{}) (map[int64]bool, map[int64]int) {
	t.Helper()
	seen := map[int64]bool{}
	claimed := map[int64]int{} // packet -> packet.claimed events read
	var cursor int64
	for {
		var last bool
		select {
		case <-finished:
			last = true
		default:
		}
		p := c.events(fmt.Sprintf("?after=%d&limit=25&wait=1", cursor))
		for _, e := range p.Events {
			switch {
			case seen[e.ID]:
				t.Errorf("event %d read twice", e.ID)
			case e.ID != cursor+1:
				t.Errorf("after event %d the feed answered %d", cursor, e.ID)
			}
			seen[e.ID] = true
			cursor = e.ID
			if e.Type == "packet.claimed" {
				var d struct {
					PacketID int64 `json:"packet_id"`
				}
				_ = json.Unmarshal(e.Data, &d)
				claimed[d.PacketID]++
			}
		}
		if *p.NextAfter != cursor {
			t.Fatalf("next_after %d, last event read %d", *p.NextAfter, cursor)
		}
		if last && len(p.Events) == 0 {
			break
		}
	}
	return seen, claimed
}
