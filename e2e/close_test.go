package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"redpacket/internal/testenv"
)

// A sender's close over HTTP: later grabs are refused, the flusher settles
// and refunds the rest within seconds, and every event of the envelope
// carries its metadata and never its password.
func TestCloseSettlesWithinSeconds(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.Redis(t)
	s := startStack(t, testenv.EmptyPostgresURL(t), testenv.RedisURL(t), prefix)
	var created struct {
		EnvelopeID int64 `json:"envelope_id"`
	}
	if code := call(t, "POST", s.base+"/v1/envelopes", "", `{"sender_id":"alice","total_cents":500,"count":5,`+
		`"password":"hunter2-口令","metadata":{"campaign":"cny"}}`, &created); code != 201 {
		t.Fatalf("create: %d", code)
	}
	grab := fmt.Sprintf("%s/v1/envelopes/%d/grab", s.base, created.EnvelopeID)
	var bob struct {
		AmountCents int64 `json:"amount_cents"`
	}
	if code := call(t, "POST", grab, "", `{"user_id":"bob","password":"hunter2-口令"}`, &bob); code != 200 {
		t.Fatalf("grab: %d", code)
	}
	closedAt := time.Now()
	if code := call(t, "POST", fmt.Sprintf("%s/v1/envelopes/%d/close", s.base, created.EnvelopeID), "", "", nil); code != 200 {
		t.Fatalf("close: %d", code)
	}
	if code := call(t, "POST", grab, "", `{"user_id":"carol","password":"hunter2-口令"}`, nil); code != 409 {
		t.Fatalf("a grab after the close: %d, want 409", code)
	}
	var settled settledData
	waitUntil(t, 15*time.Second, "envelope.settled", func() bool {
		for _, e := range readFeed(t, s.base) {
			if e.Type == "envelope.settled" && e.EnvelopeID == created.EnvelopeID {
				return json.Unmarshal(e.Data, &settled) == nil
			}
		}
		return false
	})
	t.Logf("settled %v after the close", time.Since(closedAt).Round(100*time.Millisecond))
	if settled.ClaimedCents != bob.AmountCents || settled.RefundedCents != 500-bob.AmountCents || settled.Status != "settled" {
		t.Fatalf("settlement %+v, want bob's %d cents claimed and the rest refunded", settled, bob.AmountCents)
	}
	for _, e := range readFeed(t, s.base) {
		if e.EnvelopeID != created.EnvelopeID {
			continue
		}
		var d struct {
			Metadata map[string]string `json:"metadata"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil || d.Metadata["campaign"] != "cny" {
			t.Errorf("%s event without the metadata: %s", e.Type, e.Data)
		}
		if strings.Contains(string(e.Data), "hunter2") {
			t.Errorf("%s event holds the password: %s", e.Type, e.Data)
		}
	}
}
