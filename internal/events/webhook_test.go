package events_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"go.uber.org/zap/zaptest"

	"redpacket/internal/events"
)

// secret is the webhook secret of the tests but the rotation's, as an
// operator writes it in WEBHOOK_SECRET and a receiver holds it.
var secret = whsec("tests-webhook-key-0123456789abcdef")

// whsec is the Standard Webhooks form of a key.
func whsec(key string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(key)) }

// keyOf is the key of a whsec_ secret.
func keyOf(t testing.TB, s string) []byte {
	t.Helper()
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
	if err != nil {
		t.Error(err) // not Fatal: called by the handler's goroutine too
	}
	return k
}

// hang is a receiver's decision to answer nothing until the sender gives up.
const hang = 0

// receiver is a campaign backend's webhook endpoint. It checks every
// request's signature with the Standard Webhooks library and a secret it
// trusts, checks the deprecated signature header with the same secret, and
// records the events it accepted, in arrival order.
type receiver struct {
	t      *testing.T
	decide func(m events.Message, attempt int) int // status to answer, or hang

	mu       sync.Mutex
	trusted  string   // the secret it verifies with
	probes   []string // secrets it records, per request, whether they verify
	attempts map[int64]int
	accepted []events.Message
	requests []request
}

// request is what a receiver saw of one request: for each probe secret,
// whether its key verified the standard and the deprecated signatures.
type request struct {
	m           events.Message
	std, legacy []bool
}

func newReceiver(t *testing.T, decide func(m events.Message, attempt int) int) (*receiver, string) {
	rc := &receiver{t: t, decide: decide, trusted: secret, attempts: map[int64]int{}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return rc, srv.URL
}

// trust makes the receiver verify with s from now on.
func (rc *receiver) trust(s string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.trusted = s
}

// verifies reports whether s verifies a request's standard signature (with
// the specification's library) and its deprecated one.
func verifies(t *testing.T, s string, h http.Header, body []byte) (std, legacy bool) {
	wh, err := standardwebhooks.NewWebhook(s)
	if err != nil {
		t.Errorf("secret %s: %v", s, err) // not Fatal: called by the handler's goroutine
		return false, false
	}
	std = wh.Verify(body, h) == nil
	legacy = events.VerifyLegacy(keyOf(t, s), h.Get(events.LegacySignatureHeader), body, time.Now(), time.Minute) == nil
	return std, legacy
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	rc.mu.Lock()
	trusted, probes := rc.trusted, rc.probes
	rc.mu.Unlock()
	if std, legacy := verifies(rc.t, trusted, r.Header, body); !std || !legacy {
		rc.t.Errorf("request with %s %q, %s %q: verified %v, deprecated header verified %v",
			events.SignatureHeader, r.Header.Get(events.SignatureHeader),
			events.LegacySignatureHeader, r.Header.Get(events.LegacySignatureHeader), std, legacy)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var m events.Message
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || m.ID <= 0 || m.EnvelopeID <= 0 || m.Type == "" || len(m.Data) == 0 {
		rc.t.Errorf("request body %s: %v", body, err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	id := strconv.FormatInt(m.ID, 10)
	if r.Header.Get(events.IDHeader) != id || r.Header.Get(events.LegacyEventIDHeader) != id || r.Method != http.MethodPost {
		rc.t.Errorf("%s with %s %q and %s %q for event %d", r.Method, events.IDHeader, r.Header.Get(events.IDHeader),
			events.LegacyEventIDHeader, r.Header.Get(events.LegacyEventIDHeader), m.ID)
	}
	seen := request{m: m}
	for _, p := range probes {
		std, legacy := verifies(rc.t, p, r.Header, body)
		seen.std, seen.legacy = append(seen.std, std), append(seen.legacy, legacy)
	}
	rc.mu.Lock()
	rc.attempts[m.ID]++
	n := rc.attempts[m.ID]
	rc.requests = append(rc.requests, seen)
	rc.mu.Unlock()
	status := rc.decide(m, n)
	if status == hang {
		<-r.Context().Done()
		return
	}
	if status >= 200 && status < 300 {
		rc.mu.Lock()
		rc.accepted = append(rc.accepted, m)
		rc.mu.Unlock()
	}
	w.WriteHeader(status)
}

// byEnvelope returns the accepted event ids of each envelope, in arrival
// order.
func (rc *receiver) byEnvelope() map[int64][]int64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[int64][]int64{}
	for _, m := range rc.accepted {
		out[m.EnvelopeID] = append(out[m.EnvelopeID], m.ID)
	}
	return out
}

func (rc *receiver) tries(id int64) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.attempts[id]
}

func (rc *receiver) acceptedCount() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.accepted)
}

// runWebhook runs a sender until the returned stop is called (or the test
// ends); stop returns once it has.
func runWebhook(t *testing.T, d db, l *events.Listener, cfg events.WebhookConfig) (stop func()) {
	t.Helper()
	if cfg.Keys == nil {
		cfg.Keys = [][]byte{keyOf(t, secret)}
	}
	w := events.NewWebhook(d.Store, l, cfg, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// fastRetries are settings that make a test's backoffs short.
func fastRetries(url string) events.WebhookConfig {
	return events.WebhookConfig{URL: url, Timeout: 150 * time.Millisecond, MinBackoff: 20 * time.Millisecond,
		MaxBackoff: 150 * time.Millisecond, Workers: 2, Poll: 50 * time.Millisecond}
}

// eventIDsByEnvelope reads every event id in PostgreSQL, by envelope.
func (d db) eventIDsByEnvelope(t *testing.T) map[int64][]int64 {
	t.Helper()
	rows, err := d.pool.Query(t.Context(), `SELECT envelope_id, id FROM event_messages ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64][]int64{}
	for rows.Next() {
		var env, id int64
		if err := rows.Scan(&env, &id); err != nil {
			t.Fatal(err)
		}
		out[env] = append(out[env], id)
	}
	return out
}

func (d db) undelivered(t *testing.T) int {
	return d.count(t, `SELECT count(*) FROM event_messages WHERE delivered_at IS NULL`)
}

// wantAllAccepted checks that every event in PostgreSQL is recorded
// delivered and that the receiver accepted each envelope's events in order,
// allowing a repeat of the last one (at least once) only when dups is set.
func wantAllAccepted(t *testing.T, d db, rc *receiver, dups bool) {
	t.Helper()
	if n := d.undelivered(t); n != 0 {
		t.Errorf("%d events not recorded delivered", n)
	}
	want := d.eventIDsByEnvelope(t)
	got := rc.byEnvelope()
	for env, ids := range want {
		seq := got[env]
		if dups {
			seq = slices.Compact(slices.Clone(seq))
		}
		if !slices.Equal(seq, ids) {
			t.Errorf("envelope %d: receiver accepted %v, want %v in this order", env, got[env], ids)
		}
	}
	for env := range got {
		if _, ok := want[env]; !ok {
			t.Errorf("receiver accepted events of envelope %d, which has none", env)
		}
	}
}

// A receiver that refuses everything, then lets requests time out, then
// recovers ends up with every event, each envelope's in order. (With
// timeouts this short, a request answered late on a loaded machine counts
// as failed and is sent again: delivery is at least once, so a repeat of
// the event just accepted is allowed.)
func TestWebhookFailsTimesOutAndRecovers(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	for env := int64(1); env <= 3; env++ {
		d.openEnvelope(t, env, 6)
		d.claimPackets(t, env, 0, 4)
	}
	const (
		failing = iota
		hanging
		working
	)
	var mode atomic.Int32
	var refused, hung atomic.Int32
	rc, url := newReceiver(t, func(events.Message, int) int {
		switch mode.Load() {
		case failing:
			refused.Add(1)
			return http.StatusInternalServerError
		case hanging:
			hung.Add(1)
			return hang
		}
		return http.StatusOK
	})
	l, _ := startListener(t, d.url)
	runWebhook(t, d, l, fastRetries(url))

	waitFor(t, 10*time.Second, "three refusals", func() bool { return refused.Load() >= 3 })
	if n := d.count(t, `SELECT count(*) FROM event_messages WHERE attempts > 0 AND next_attempt_at IS NOT NULL
		AND last_error LIKE '%500 Internal Server Error%'`); n == 0 {
		t.Error("no failed attempt recorded with its error")
	}
	for env := int64(1); env <= 3; env++ {
		d.claimPackets(t, env, 4, 6) // more events arrive meanwhile
	}
	mode.Store(hanging)
	waitFor(t, 10*time.Second, "two timeouts", func() bool { return hung.Load() >= 2 })
	mode.Store(working)
	waitFor(t, 20*time.Second, "every event delivered", func() bool { return d.undelivered(t) == 0 })
	wantAllAccepted(t, d, rc, true)
	if total := d.count(t, `SELECT count(*) FROM event_messages`); total != 3*7 {
		t.Errorf("%d events, want 21", total)
	}
}

// One envelope whose requests hang does not hold up the others; once the
// receiver answers for it, its events follow, in order.
func TestWebhookHangingEnvelopeDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	for env := int64(1); env <= 4; env++ {
		d.openEnvelope(t, env, 5)
		d.claimPackets(t, env, 0, 3)
	}
	var released atomic.Bool
	rc, url := newReceiver(t, func(m events.Message, _ int) int {
		if m.EnvelopeID == 1 && !released.Load() {
			return hang
		}
		return http.StatusNoContent
	})
	cfg := fastRetries(url)
	cfg.Timeout, cfg.MaxBackoff = 300*time.Millisecond, 300*time.Millisecond
	runWebhook(t, d, nil, cfg) // no listener: found by polling
	waitFor(t, 15*time.Second, "envelopes 2-4 delivered", func() bool {
		return d.count(t, `SELECT count(*) FROM event_messages WHERE envelope_id <> 1 AND delivered_at IS NULL`) == 0
	})
	if n := d.count(t, `SELECT count(*) FROM event_messages WHERE envelope_id = 1 AND delivered_at IS NOT NULL`); n != 0 {
		t.Fatalf("%d events of the hanging envelope recorded delivered", n)
	}
	if first := d.eventIDsByEnvelope(t)[1]; rc.tries(first[1]) != 0 {
		t.Errorf("envelope 1's second event was sent before its first was accepted")
	}
	released.Store(true)
	waitFor(t, 15*time.Second, "every event delivered", func() bool { return d.undelivered(t) == 0 })
	wantAllAccepted(t, d, rc, true) // a 300 ms timeout: a late answer is sent again

}

// A sender stopped half-way and started again sends what was left, and
// nothing the receiver had accepted but what was in flight; an envelope in
// backoff stays in backoff across the restart.
func TestWebhookRestartNeitherLosesNorFloods(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	for env := int64(1); env <= 4; env++ {
		d.openEnvelope(t, env, 30)
		d.claimPackets(t, env, 0, 15)
	}
	d.openEnvelope(t, 9, 3)
	d.claimPackets(t, 9, 0, 2)
	rc, url := newReceiver(t, func(m events.Message, _ int) int {
		if m.EnvelopeID == 9 {
			return http.StatusServiceUnavailable
		}
		time.Sleep(time.Millisecond)
		return http.StatusOK
	})
	cfg := fastRetries(url)
	cfg.MinBackoff, cfg.MaxBackoff = time.Hour, time.Hour // one failure: an hour's wait
	// Only envelope 9 may fail: a request of another timed out on a loaded
	// machine would make its envelope wait the hour too.
	cfg.Timeout = 10 * time.Second
	nine := d.eventIDsByEnvelope(t)[9]
	stop := runWebhook(t, d, nil, cfg)
	waitFor(t, 10*time.Second, "20 events accepted and envelope 9 refused", func() bool {
		return rc.acceptedCount() >= 20 && d.count(t, `SELECT attempts FROM event_messages WHERE id = $1`, nine[0]) == 1
	})
	stop()
	before := rc.acceptedCount()
	if tries := rc.tries(nine[0]); tries != 1 {
		t.Fatalf("envelope 9's first event tried %d times before the restart, want 1", tries)
	}
	for env := int64(1); env <= 4; env++ {
		d.claimPackets(t, env, 15, 30)
	}

	runWebhook(t, d, nil, cfg)
	waitFor(t, 15*time.Second, "envelopes 1-4 delivered", func() bool {
		return d.count(t, `SELECT count(*) FROM event_messages WHERE envelope_id <> 9 AND delivered_at IS NULL`) == 0
	})
	time.Sleep(200 * time.Millisecond)
	if tries := rc.tries(nine[0]); tries != 1 {
		t.Errorf("envelope 9's first event tried %d times after the restart, want still 1 (it waits an hour)", tries)
	}
	if rc.tries(nine[1]) != 0 {
		t.Errorf("envelope 9's second event was sent before its first was accepted")
	}
	wantEachOnce(t, d, rc, before, cfg.Workers)
}

// wantEachOnce checks that the receiver accepted every event of envelopes
// 1-4 once, in order, but for a request in flight at the stop (at most one
// per worker). before is how many it had accepted before the restart.
func wantEachOnce(t *testing.T, d db, rc *receiver, before, workers int) {
	t.Helper()
	want := d.count(t, `SELECT count(*) FROM event_messages WHERE envelope_id <> 9`)
	if got := rc.acceptedCount(); got < want || got > want+workers {
		t.Errorf("receiver accepted %d events (%d before the restart), want %d (+ at most %d repeats)",
			got, before, want, workers)
	}
	got := rc.byEnvelope()
	delete(got, 9)
	ids := d.eventIDsByEnvelope(t)
	for env, seq := range got {
		if !slices.Equal(slices.Compact(slices.Clone(seq)), ids[env]) {
			t.Errorf("envelope %d: accepted %v, want %v", env, seq, ids[env])
		}
	}
}

// Two senders on one database (two flushers) while events keep coming: each
// event is accepted once, each envelope's in order.
func TestWebhookTwoSenders(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	const envelopes, perEnvelope = 4, 40
	for env := int64(1); env <= envelopes; env++ {
		d.openEnvelope(t, env, perEnvelope)
	}
	rc, url := newReceiver(t, func(events.Message, int) int {
		time.Sleep(rand.N(2 * time.Millisecond))
		return http.StatusOK
	})
	l, _ := startListener(t, d.url)
	cfg := fastRetries(url)
	// Each event once: a timeout long enough that no answer comes late.
	cfg.Workers, cfg.PerTurn, cfg.Timeout = 3, 3, 10*time.Second
	runWebhook(t, d, l, cfg)
	runWebhook(t, d, l, cfg)
	for i := 0; i < perEnvelope; i += 5 {
		for env := int64(1); env <= envelopes; env++ {
			d.claimPackets(t, env, i, i+5)
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(t, 20*time.Second, "every event delivered", func() bool { return d.undelivered(t) == 0 })
	wantAllAccepted(t, d, rc, false)
	if n := len(slices.Collect(maps.Keys(rc.byEnvelope()))); n != envelopes {
		t.Errorf("events of %d envelopes accepted, want %d", n, envelopes)
	}
}

// A request in flight when the sender is told to stop is answered and
// recorded (within StopGrace), not cut off and sent again after the
// restart: a secret's rotation restarts every flusher twice.
func TestWebhookStopFinishesTheRequestInFlight(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.openEnvelope(t, 1, 3)
	d.claimPackets(t, 1, 0, 1)
	first := d.eventIDsByEnvelope(t)[1][0]
	started := make(chan struct{}, 1)
	rc, url := newReceiver(t, func(m events.Message, _ int) int {
		if m.ID == first {
			select {
			case started <- struct{}{}:
			default:
			}
			time.Sleep(500 * time.Millisecond)
		}
		return http.StatusOK
	})
	cfg := fastRetries(url)
	cfg.Timeout, cfg.StopGrace, cfg.Workers = 5*time.Second, 3*time.Second, 1
	stop := runWebhook(t, d, nil, cfg)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first event was not sent")
	}
	stop() // while the receiver takes its time
	if n := d.count(t, `SELECT count(*) FROM event_messages WHERE id = $1 AND delivered_at IS NOT NULL`, first); n != 1 {
		t.Errorf("the event answered while the sender stopped is not recorded delivered: it would be sent again")
	}
	if got := rc.tries(first); got != 1 {
		t.Errorf("the event was sent %d times, want 1", got)
	}
}
