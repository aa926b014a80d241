package e2e_test

import (
	"testing"
	"time"

	"redpacket/internal/testenv"
)

// An envelope expires while 32 goroutines grab it: grabs asked before
// expires_at are granted, grabs asked after it are refused with 409 expired,
// and the flusher settles the envelope within seconds: every granted packet
// claimed in PostgreSQL, every other one refunded, claimed + refunded =
// total, settled_at set, and the audit passes.
func TestFaultExpiryRace(t *testing.T) {
	t.Parallel()
	dbURL := testenv.PostgresURL(t)
	_, prefix := testenv.Redis(t)
	s := startStack(t, dbURL, testenv.RedisURL(t), prefix)
	e := s.createEnvelope(t, 3000, 2)
	// 32 workers, each at most one grab per 25 ms: at most ~2600 grabs before
	// expiry, so the envelope cannot sell out.
	load := startLoad(t, s.base, []int64{e.EnvelopeID}, loadSpec{Workers: 32, For: 3500 * time.Millisecond, Max: 20000, Pace: 25 * time.Millisecond, Tag: "x"})
	log := load.wait()
	log.resolve(s.base, 10*time.Second)
	t.Logf("expires at %s; load: %s", e.ExpiresAt.Format("15:04:05.000"), log.summary())

	// A grab asked at expires_at is still served (the API's rule); one asked
	// later is refused. The margin covers the millisecond rounding of
	// expires_at.
	cutoff := e.ExpiresAt.Add(2 * time.Millisecond)
	before, after := 0, 0
	var lastGrant time.Time
	for _, g := range log.eventsCopy() {
		switch {
		case g.Status == 200 && !g.Repeat:
			if g.Sent.After(cutoff) {
				t.Errorf("user %s was granted packet %d by a grab sent %s after expiry", g.User, g.Packet, g.Sent.Sub(e.ExpiresAt))
			}
			before++
			if g.Got.After(lastGrant) {
				lastGrant = g.Got
			}
		case g.Sent.After(cutoff) && !g.Retry:
			after++
			if g.Status != 409 || g.Code != "expired" {
				t.Errorf("grab by %s sent %s after expiry answered %s, want 409 expired", g.User, g.Sent.Sub(e.ExpiresAt), g.key())
			}
		}
	}
	if before == 0 || after == 0 {
		t.Fatalf("the load did not straddle the expiry: %d grants, %d grabs after it", before, after)
	}
	if n := log.counts()["409 sold_out"]; n > 0 {
		t.Fatalf("the envelope sold out (%d grabs answered sold_out); it must expire with packets left", n)
	}
	t.Logf("last grant answered %s after expires_at; %d grabs refused after it", lastGrant.Sub(e.ExpiresAt), after)

	db := connectTestDB(t, dbURL)
	settledIn := waitEnvelopesStatus(t, db, []int64{e.EnvelopeID}, "settled", 10*time.Second)
	t.Logf("settled %s after the load ended, %s after expiry", settledIn.Round(time.Millisecond),
		time.Since(e.ExpiresAt).Round(time.Millisecond))
	r := readEnvelopeState(t, db, e.EnvelopeID)
	granted := len(log.granted)
	if r.ClaimedCount != granted || r.RefundedCount != r.Count-granted || r.UnclaimedCount != 0 ||
		r.ClaimedCents+r.RefundedCents != r.TotalCents || !r.Settled {
		t.Errorf("settled envelope: %+v; %d grabs were granted", r, granted)
	}
	assertLedger(t, s, ledgerSpec{Envelopes: []int64{e.EnvelopeID}, Logs: []*loadLog{log}})
	assertNoConflicts(t, db)
	s.stop(t)
}
