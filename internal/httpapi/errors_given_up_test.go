package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// A keyed retry of a create whose envelope was given up (failed, refunded)
// names the envelope and tells the client to create again with another
// key: the key stays bound to the failed envelope for IDEMPOTENCY_TTL, so
// retrying it, as a generic 503 invites, could never create one.
func TestKeyedRetryOfAGivenUpEnvelopeSaysCreateWithAnotherKey(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	const next = 1001 // the stack's first envelope id
	// Redis refuses the load: the envelope is written but stays loading.
	if err := s.RDB.Set(t.Context(), s.Redis.Keys().Meta(next), "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	requireError(t, c.createKeyed("order-7", idemBody), http.StatusServiceUnavailable, "unavailable")
	if err := s.RDB.Del(t.Context(), s.Redis.Keys().Meta(next)).Err(); err != nil {
		t.Fatal(err)
	}
	// The flusher gives it up past LOADING_FAIL_AFTER.
	if _, err := s.PG.FailLoading(t.Context(), next, s.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		msg := requireError(t, c.createKeyed("order-7", idemBody), http.StatusServiceUnavailable, "unavailable")
		if !strings.Contains(msg, "envelope 1001 of this Idempotency-Key was given up and refunded") ||
			!strings.Contains(msg, "create again with another key") {
			t.Errorf("keyed retry of a given-up envelope: %q, want it to name envelope 1001 and ask for another key", msg)
		}
	}
	if a := c.createKeyed("order-8", idemBody); a.Status != http.StatusCreated {
		t.Errorf("create again with another key: %s, want 201", a)
	}
}
