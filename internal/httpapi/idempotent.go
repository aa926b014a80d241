package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/idempotency"
)

// createIdempotent serves a create that carries an Idempotency-Key: the
// answer is the first request's with that key, replayed byte for byte (and
// marked so) to every repeat.
func (a *API) createIdempotent(w http.ResponseWriter, r *http.Request, req envelope.CreateRequest,
	ir idempotency.Request) {
	ans, err := a.svc.CreateIdempotent(r.Context(), req, ir, renderCreate)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if ans.Replayed {
		w.Header().Set(idempotency.ReplayedHeader, "true")
	}
	w.WriteHeader(ans.Status)
	_, _ = w.Write(ans.Body)
}

// renderCreate writes a create's answer as writeJSON would.
func renderCreate(e grab.Envelope) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(createAnswer(e)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
