package e2e_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"redpacket/internal/events"
	"redpacket/internal/testenv"
)

// The webhook secrets, in the Standard Webhooks form WEBHOOK_SECRET takes:
// the flusher starts with the old one and is restarted with both, as an
// operator rotating the secret does.
var (
	webhookSecret    = "whsec_" + base64.StdEncoding.EncodeToString([]byte("e2e-webhook-key-0123456789abcdef"))
	webhookNewSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("e2e-webhook-new-key-0123456789abcdef"))
)

// hookReceiver is the campaign backend's webhook endpoint: it verifies every
// request's signature with the Standard Webhooks library (and the
// deprecated header with the same key) and keeps the events it accepted in
// arrival order.
type hookReceiver struct {
	t       *testing.T
	mode    atomic.Int32 // what it answers now: hookFail, hookHang or hookOK
	refused atomic.Int32
	hung    atomic.Int32
	rotated atomic.Bool // the flusher now runs with both secrets
	old     *standardwebhooks.Webhook
	new     *standardwebhooks.Webhook

	mu       sync.Mutex
	accepted []feedEvent
	badSigs  int
	newEarly int // requests signed with the new secret before the rotation
	newLate  int // requests signed with the new secret after it
}

const (
	hookFail = iota
	hookHang
	hookOK
)

func webhookVerifier(t *testing.T, secret string) *standardwebhooks.Webhook {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	return wh
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rotated := h.rotated.Load() // before the request is read: it may be the old flusher's
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var e feedEvent
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(webhookSecret, "whsec_"))
	verr := errors.Join(h.old.Verify(body, r.Header),
		events.VerifyLegacy(key, r.Header.Get(events.LegacySignatureHeader), body, time.Now(), time.Minute))
	derr := dec.Decode(&e)
	if verr != nil || derr != nil || r.Header.Get(events.IDHeader) != strconv.FormatInt(e.ID, 10) {
		h.mu.Lock()
		h.badSigs++
		h.mu.Unlock()
		h.t.Errorf("webhook request %s (%s: %q, %s: %q): signature %v, body %v", body, events.IDHeader,
			r.Header.Get(events.IDHeader), events.SignatureHeader, r.Header.Get(events.SignatureHeader), verr, derr)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if h.new.Verify(body, r.Header) == nil {
		h.mu.Lock()
		if rotated {
			h.newLate++
		} else {
			h.newEarly++
		}
		h.mu.Unlock()
	}
	switch h.mode.Load() {
	case hookFail:
		h.refused.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	case hookHang:
		h.hung.Add(1)
		<-r.Context().Done()
	default:
		h.mu.Lock()
		h.accepted = append(h.accepted, e)
		h.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}
}

func (h *hookReceiver) acceptedIDs() map[int64]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[int64]bool{}
	for _, e := range h.accepted {
		out[e.ID] = true
	}
	return out
}

// A deployment with a webhook whose receiver first refuses everything, then
// lets requests time out, while grabs go on; the flusher is SIGKILLed in the
// middle and restarted with a second secret (a rotation begins); then the
// receiver recovers. It ends with every event of the feed accepted, each
// with a valid signature, each envelope's in order, and the new secret
// verifying the requests of the restarted flusher only.
func TestEventsWebhookFailsTimesOutRecovers(t *testing.T) {
	t.Parallel()
	h := &hookReceiver{t: t, old: webhookVerifier(t, webhookSecret), new: webhookVerifier(t, webhookNewSecret)}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	dbURL := testenv.PostgresURL(t)
	_, prefix := testenv.Redis(t)
	s := startStackWith(t, dbURL, testenv.RedisURL(t), prefix, "WEBHOOK_URL="+srv.URL+"/hooks",
		"WEBHOOK_SECRET="+webhookSecret, "WEBHOOK_TIMEOUT=300ms", "WEBHOOK_MAX_BACKOFF=400ms", "WEBHOOK_WORKERS=2")
	_, ids := s.createEnvelopes(t, 3600, 20, 50, 80)
	grab := func(from, to int) {
		for i := from; i < to; i++ {
			env := ids[i%len(ids)]
			call(t, "POST", fmt.Sprintf("%s/v1/envelopes/%d/grab", s.base, env), "", fmt.Sprintf(`{"user_id":"w-%d"}`, i), nil)
		}
	}

	grab(0, 40)
	waitUntil(t, 20*time.Second, "three refusals", func() bool { return h.refused.Load() >= 3 })
	h.mode.Store(hookHang)
	grab(40, 80)
	waitUntil(t, 20*time.Second, "two timeouts", func() bool { return h.hung.Load() >= 2 })
	killAndReap(t, s.flusher)
	h.rotated.Store(true)
	s.flusher = start(t, "flusher", append(slices.Clone(s.env), "WEBHOOK_SECRET="+webhookSecret+" "+webhookNewSecret))
	grab(80, 120)
	h.mode.Store(hookOK)

	waitUntil(t, 30*time.Second, "every event accepted", func() bool {
		evs := readFeed(t, s.base)
		got := h.acceptedIDs()
		for _, e := range evs {
			if !got[e.ID] {
				return false
			}
		}
		return len(evs) > 0
	})
	evs := readFeedWhenQuiet(t, s.base, time.Second, 20*time.Second)
	waitUntil(t, 20*time.Second, "the last events accepted", func() bool { return len(h.acceptedIDs()) == len(evs) })

	// Each envelope's events arrived in order; one may repeat (at least
	// once: the flusher was killed), none came before an earlier one.
	repeats := h.assertInOrder(t, evs)
	retried := assertEventsDeliveredAfterRetries(t, connectTestDB(t, dbURL), h)
	h.mu.Lock()
	if h.newEarly != 0 || h.newLate == 0 {
		t.Errorf("%d requests signed with the new secret before the flusher had it, %d after, want 0 and some",
			h.newEarly, h.newLate)
	}
	h.mu.Unlock()
	t.Logf("%d events accepted (%d repeats); %d refused, %d timed out: %d requests retried",
		len(evs), repeats, h.refused.Load(), h.hung.Load(), retried)
	s.stop(t)
}

// assertInOrder fails the test unless the receiver accepted each envelope's
// events of evs in order, each perhaps repeated; it returns how many
// repeats it accepted.
func (h *hookReceiver) assertInOrder(t *testing.T, evs []feedEvent) (repeats int) {
	t.Helper()
	want := map[int64][]int64{}
	for _, e := range evs {
		want[e.EnvelopeID] = append(want[e.EnvelopeID], e.ID)
	}
	got := map[int64][]int64{}
	h.mu.Lock()
	for _, e := range h.accepted {
		got[e.EnvelopeID] = append(got[e.EnvelopeID], e.ID)
	}
	repeats = len(h.accepted) - len(evs)
	h.mu.Unlock()
	for env, seq := range want {
		if !slices.Equal(slices.Compact(slices.Clone(got[env])), seq) {
			t.Errorf("envelope %d: accepted %v, want %v", env, got[env], seq)
		}
	}
	return repeats
}

// assertEventsDeliveredAfterRetries fails the test unless PostgreSQL records
// every event delivered and the receiver refused or timed out some requests
// (each then retried, since all were delivered); it returns how many.
func assertEventsDeliveredAfterRetries(t *testing.T, db *pgx.Conn, h *hookReceiver) (retried int) {
	t.Helper()
	var undelivered int
	if err := db.QueryRow(t.Context(), `SELECT count(*) FROM event_messages WHERE delivered_at IS NULL`).Scan(&undelivered); err != nil {
		t.Fatal(err)
	}
	retried = int(h.refused.Load() + h.hung.Load())
	if undelivered != 0 || retried == 0 {
		t.Errorf("%d events not recorded delivered, %d requests failed", undelivered, retried)
	}
	// The flushers recorded that they send webhooks, for the operator
	// commands run without their settings (flusher retention).
	var recorded int64
	if err := db.QueryRow(t.Context(), `SELECT value FROM service_settings WHERE name = 'webhooks'`).Scan(&recorded); err != nil || recorded != 1 {
		t.Errorf("service_settings webhooks = %d, %v; want 1", recorded, err)
	}
	return retried
}

// waitUntil polls cond every 100 ms until it holds or d passes.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A secret not in the whsec_ form (the form used before) stops the flusher
// at start with exit code 2 and a message naming WEBHOOK_SECRET and how to
// convert it, without repeating the secret.
func TestEventsWebhookSecretOfTheOldFormRefused(t *testing.T) {
	t.Parallel()
	const old = "an-old-form-secret-0123456789"
	code, out := run(t, "flusher", []string{"WEBHOOK_URL=http://127.0.0.1:1/hooks", "WEBHOOK_SECRET=" + old})
	if code != 2 || !strings.Contains(out, "WEBHOOK_SECRET") || !strings.Contains(out, "whsec_") ||
		strings.Contains(out, old) {
		t.Errorf("flusher exited %d with %q; want 2, naming WEBHOOK_SECRET and the whsec_ form, not the secret", code, out)
	}
}
