package httpapi

import (
	"encoding/json"
	"net/http"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/idempotency"
)

type createRequest struct {
	SenderID         string            `json:"sender_id"`
	TotalCents       int64             `json:"total_cents"`
	Count            int64             `json:"count"`
	ExpiresInSeconds *int64            `json:"expires_in_seconds"`
	Kind             *envelope.Kind    `json:"kind"`
	Recipients       []string          `json:"recipients"`
	Password         *string           `json:"password"`
	Greeting         string            `json:"greeting"`
	Metadata         map[string]string `json:"metadata"`
	StartsAt         *string           `json:"starts_at"`
}

// envelopeRequest is req as the envelope package takes it, where a kind or
// starts_at of "" means one left out. Given as "", each is refused as the
// value it is not (one of random and fixed, an RFC 3339 time), not read as
// the default.
func (req createRequest) envelopeRequest() (envelope.CreateRequest, error) {
	creq := envelope.CreateRequest{
		SenderID: req.SenderID, TotalCents: req.TotalCents, Count: req.Count,
		ExpiresInSeconds: req.ExpiresInSeconds, Recipients: req.Recipients,
		Password: req.Password, Greeting: req.Greeting, Metadata: req.Metadata,
	}
	if req.Kind != nil {
		if *req.Kind == "" {
			return creq, &envelope.FieldError{Field: "kind", Problem: "must be random or fixed"}
		}
		creq.Kind = *req.Kind
	}
	if req.StartsAt != nil {
		if *req.StartsAt == "" {
			return creq, &envelope.FieldError{Field: "starts_at", Problem: "must be an RFC 3339 time, e.g. 2026-11-21T10:00:00Z"}
		}
		creq.StartsAt = *req.StartsAt
	}
	return creq, nil
}

type createResponse struct {
	EnvelopeID int64           `json:"envelope_id"`
	ShareCode  string          `json:"share_code"`
	SenderID   string          `json:"sender_id"`
	TotalCents int64           `json:"total_cents"`
	Count      int             `json:"count"`
	Status     envelope.Status `json:"status"`
	ExpiresAt  Timestamp       `json:"expires_at"`
	envelopeExtras
	// SplitCommitment commits to the split before the first grab; see
	// GET /v1/envelopes/{id}/split.
	SplitCommitment string `json:"split_commitment,omitempty"`
}

// envelopeExtras are the fields the create and status answers share about
// how the envelope is offered. The password itself is never answered.
type envelopeExtras struct {
	Kind            envelope.Kind   `json:"kind"`
	RecipientsCount int             `json:"recipients_count"`
	HasPassword     bool            `json:"has_password"`
	Greeting        string          `json:"greeting"`
	Metadata        json.RawMessage `json:"metadata"`
	StartsAt        Timestamp       `json:"starts_at"`
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	key, keyed, err := idempotency.ParseKey(r.Header.Values(idempotency.Header))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	body, err := readBody(w, r, maxCreateBody)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	var req createRequest
	if err := decodeBody(body, &req, false); err != nil {
		a.writeError(w, r, err)
		return
	}
	creq, err := req.envelopeRequest()
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if keyed {
		a.createIdempotent(w, r, creq, idempotency.Request{Key: key, Fingerprint: idempotency.Fingerprint(body)})
		return
	}
	e, err := a.svc.Create(r.Context(), creq)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, createAnswer(e))
}

func createAnswer(e grab.Envelope) createResponse {
	return createResponse{
		EnvelopeID: e.ID, ShareCode: e.ShareCode, SenderID: e.SenderID, TotalCents: e.TotalCents, Count: e.Count,
		Status: e.Status, ExpiresAt: Timestamp(e.ExpiresAt), SplitCommitment: e.SplitCommitment,
		envelopeExtras: envelopeExtras{
			Kind: e.Kind, RecipientsCount: e.RecipientsCount, HasPassword: e.HasPassword,
			Greeting: e.Greeting, Metadata: e.Metadata, StartsAt: Timestamp(e.StartsAt),
		},
	}
}

type grabRequest struct {
	UserID   string `json:"user_id"`
	Password string `json:"password"`
}

type grabResponse struct {
	EnvelopeID  int64     `json:"envelope_id"`
	PacketID    int64     `json:"packet_id"`
	AmountCents int64     `json:"amount_cents"`
	OrderNo     OrderNo   `json:"order_no"`
	GrabbedAt   Timestamp `json:"grabbed_at"`
	Repeat      bool      `json:"repeat"`
}

func (a *API) grab(w http.ResponseWriter, r *http.Request) {
	a.grabID(w, r, r.PathValue("id"))
}

// grabID serves a grab of the envelope whose {id} path value is pathValue.
func (a *API) grabID(w http.ResponseWriter, r *http.Request, pathValue string) {
	id, err := parseID(pathValue)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	req, err := decodeGrab(w, r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	c, err := a.svc.GrabWithPassword(r.Context(), id, req.UserID, req.Password)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeGrab(w, grabResponse{
		EnvelopeID: id, PacketID: c.PacketID, AmountCents: c.AmountCents, OrderNo: OrderNo(c.OrderNo),
		GrabbedAt: Timestamp(c.GrabbedAt), Repeat: c.Repeat,
	})
}

type statusResponse struct {
	EnvelopeID     int64           `json:"envelope_id"`
	ShareCode      string          `json:"share_code,omitempty"`
	SenderID       string          `json:"sender_id"`
	Status         envelope.Status `json:"status"`
	TotalCents     int64           `json:"total_cents"`
	Count          int             `json:"count"`
	GrabbedCount   int64           `json:"grabbed_count"`
	GrabbedCents   int64           `json:"grabbed_cents"`
	RemainingCount int64           `json:"remaining_count"`
	RefundedCents  int64           `json:"refunded_cents"`
	CreatedAt      Timestamp       `json:"created_at"`
	ExpiresAt      Timestamp       `json:"expires_at"`
	SettledAt      *Timestamp      `json:"settled_at,omitempty"`
	ClosedAt       *Timestamp      `json:"closed_at,omitempty"`
	envelopeExtras
	// Best is the luckiest grab once the envelope sold out or was settled;
	// null before.
	Best *claimJSON `json:"best"`
}

func (a *API) status(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	st, err := a.svc.Status(r.Context(), id)
	a.writeStatus(w, r, st, err)
}

func (a *API) statusByCode(w http.ResponseWriter, r *http.Request) {
	st, err := a.svc.StatusByCode(r.Context(), r.PathValue("sub"))
	a.writeStatus(w, r, st, err)
}

func (a *API) writeStatus(w http.ResponseWriter, r *http.Request, st grab.Status, err error) {
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toStatusResponse(st))
}

func toStatusResponse(st grab.Status) statusResponse {
	resp := statusResponse{
		EnvelopeID: st.ID, SenderID: st.SenderID, Status: st.Status,
		TotalCents: st.TotalCents, Count: st.Count, GrabbedCount: st.GrabbedCount,
		GrabbedCents: st.GrabbedCents, RemainingCount: st.RemainingCount,
		RefundedCents: st.RefundedCents, CreatedAt: Timestamp(st.CreatedAt), ExpiresAt: Timestamp(st.ExpiresAt),
	}
	resp.ShareCode = st.ShareCode
	if st.SettledAt != nil {
		t := Timestamp(*st.SettledAt)
		resp.SettledAt = &t
	}
	if st.ClosedAt != nil {
		t := Timestamp(*st.ClosedAt)
		resp.ClosedAt = &t
	}
	resp.envelopeExtras = envelopeExtras{
		Kind: st.Kind, RecipientsCount: st.RecipientsCount, HasPassword: st.HasPassword,
		Greeting: st.Greeting, Metadata: st.Metadata, StartsAt: Timestamp(st.StartsAt),
	}
	resp.Best = toClaimJSON(st.Best)
	return resp
}

func (a *API) closeEnvelope(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	var empty struct{}
	if err := decode(w, r, &empty, true); err != nil {
		a.writeError(w, r, err)
		return
	}
	st, err := a.svc.Close(r.Context(), id)
	a.writeStatus(w, r, st, err)
}

type shortIDResponse struct {
	UserID  string `json:"user_id"`
	ShortID int64  `json:"short_id"`
}

func (a *API) shortID(w http.ResponseWriter, r *http.Request) {
	var empty struct{}
	if err := decode(w, r, &empty, true); err != nil {
		a.writeError(w, r, err)
		return
	}
	user := r.PathValue("user_id")
	id, err := a.svc.ShortID(r.Context(), user)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, shortIDResponse{UserID: user, ShortID: id})
}
