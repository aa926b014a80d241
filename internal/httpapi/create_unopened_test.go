package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
)

// A create whose envelope was written but could not be opened (Redis
// refused the load) says so, with the envelope's id, apart from a 503 that
// wrote nothing: retrying it without an Idempotency-Key would create a
// second envelope. The envelope stays loading, for the flusher to open.
func TestCreateWrittenButNotOpenedNamesTheEnvelope(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	const next = 1001 // the stack's first envelope id
	if err := s.RDB.Set(t.Context(), s.Redis.Keys().Meta(next), "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	msg := requireError(t, c.do("POST", "/v1/envelopes", `{"sender_id":"s","total_cents":100,"count":2}`),
		http.StatusServiceUnavailable, "unavailable")
	if !strings.Contains(msg, "envelope 1001 was written but is not open yet") || !strings.Contains(msg, "do not create it again") {
		t.Errorf("message %q: want it to name envelope 1001 as written", msg)
	}
	if err := s.RDB.Del(t.Context(), s.Redis.Keys().Meta(next)).Err(); err != nil {
		t.Fatal(err)
	}
	if st := c.status(next); st.Status != "loading" || st.SenderID != "s" {
		t.Errorf("the envelope after the failed open: %+v, want it loading", st)
	}
}
