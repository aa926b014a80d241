package events_test

import (
	"net/http"
	"testing"
	"time"

	"redpacket/internal/events"
)

// A webhook secret is rotated with no delivery refused: the senders sign
// with the old secret, then with both (the operator's WEBHOOK_SECRET holds
// the two, and the flushers restart), then with the new one alone. The
// receiver verifies with the Standard Webhooks library, and with the old
// secret until, at some point while the senders sign with both, it switches
// to the new one. The deprecated header follows the same keys.
func TestWebhookSecretRotation(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	oldSecret := whsec("the-old-webhook-key-0123456789ab")
	newSecret := whsec("the-new-webhook-key-0123456789abcdef0123")
	rc, url := newReceiver(t, func(events.Message, int) int { return http.StatusOK })
	rc.trust(oldSecret)
	rc.probes = []string{oldSecret, newSecret}
	l, _ := startListener(t, d.url)

	// deliver runs a sender signing with secrets while packets [from, to) of
	// env are claimed, until every event is delivered.
	deliver := func(secrets []string, env int64, from, to int) {
		t.Helper()
		cfg := fastRetries(url)
		cfg.Timeout = 10 * time.Second // each event once: no answer comes late
		for _, s := range secrets {
			cfg.Keys = append(cfg.Keys, keyOf(t, s))
		}
		stop := runWebhook(t, d, l, cfg)
		d.claimPackets(t, env, from, to)
		waitFor(t, 10*time.Second, "every event delivered", func() bool { return d.undelivered(t) == 0 })
		stop()
	}
	for env := int64(1); env <= 3; env++ {
		d.openEnvelope(t, env, 6)
	}
	deliver([]string{oldSecret}, 1, 0, 6)
	deliver([]string{oldSecret, newSecret}, 2, 0, 3)
	rc.trust(newSecret) // the receiver moves over while both sign
	deliver([]string{oldSecret, newSecret}, 2, 3, 6)
	deliver([]string{newSecret}, 3, 0, 6)

	wantAllAccepted(t, d, rc, false)
	// Which secrets verified each envelope's requests: old only, both, new
	// only; by the library and by the deprecated header alike.
	want := map[int64][]bool{1: {true, false}, 2: {true, true}, 3: {false, true}}
	seen := map[int64]int{}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, r := range rc.requests {
		env := r.m.EnvelopeID
		seen[env]++
		for i, name := range []string{"old", "new"} {
			if r.std[i] != want[env][i] || r.legacy[i] != want[env][i] {
				t.Errorf("envelope %d, event %d: the %s secret verifies its signature: %v, its deprecated one: %v; want %v",
					env, r.m.ID, name, r.std[i], r.legacy[i], want[env][i])
			}
		}
	}
	for env := int64(1); env <= 3; env++ {
		if seen[env] < 6 {
			t.Errorf("envelope %d: %d requests, want one per event (at least 6)", env, seen[env])
		}
	}
}
