package httpapi

import (
	"net/http"
	"net/url"
	"redpacket/internal/grab"
	"strconv"
	"time"
)

// The page sizes of the lists: claims are rows of PostgreSQL; a sender's
// envelopes are status objects, each with a read of Redis.
const (
	claimsLimitDefault    = 100
	claimsLimitMax        = 1000
	envelopesLimitDefault = 20
	envelopesLimitMax     = 100
)

// claimJSON is a claim of an envelope's claims list, and its luckiest grab.
type claimJSON struct {
	UserID      string    `json:"user_id"`
	PacketID    int64     `json:"packet_id"`
	AmountCents int64     `json:"amount_cents"`
	OrderNo     OrderNo   `json:"order_no"`
	GrabbedAt   Timestamp `json:"grabbed_at"`
}

func toClaimJSON(c *grab.ClaimedPacket) *claimJSON {
	if c == nil {
		return nil
	}
	return &claimJSON{UserID: c.UserID, PacketID: c.PacketID, AmountCents: c.AmountCents, OrderNo: OrderNo(c.OrderNo),
		GrabbedAt: Timestamp(c.GrabbedAt)}
}

type envelopeClaimsResponse struct {
	Claims    []claimJSON `json:"claims"`
	NextAfter string      `json:"next_after"`
	Best      *claimJSON  `json:"best"`
}

// envelopeClaims serves GET /v1/envelopes/{id}/claims?after=&limit=.
func (a *API) envelopeClaims(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	v, limit, err := listQuery(r, "after", claimsLimitDefault, claimsLimitMax)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	var after int64
	if c, ok := v["after"]; ok {
		if after, err = parseClaimsCursor(c[0], id); err != nil {
			a.writeError(w, r, err)
			return
		}
	}
	page, err := a.svc.Claims(r.Context(), id, after, limit)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	resp := envelopeClaimsResponse{Claims: make([]claimJSON, len(page.Claims)), Best: toClaimJSON(page.Best)}
	for i := range page.Claims {
		resp.Claims[i] = *toClaimJSON(&page.Claims[i])
	}
	// Packets go out in one order, so later claims come after the last one
	// listed: the cursor is always given, to poll for them.
	if n := len(page.Claims); n > 0 {
		after = page.Claims[n-1].PacketID
	}
	resp.NextAfter = claimsCursor(id, after)
	writeJSON(w, http.StatusOK, resp)
}

type userClaimJSON struct {
	EnvelopeID  int64     `json:"envelope_id"`
	SenderID    string    `json:"sender_id"`
	PacketID    int64     `json:"packet_id"`
	AmountCents int64     `json:"amount_cents"`
	OrderNo     OrderNo   `json:"order_no"`
	GrabbedAt   Timestamp `json:"grabbed_at"`
}

type userClaimsResponse struct {
	Claims     []userClaimJSON `json:"claims"`
	NextBefore *string         `json:"next_before"`
}

// userClaims serves GET /v1/users/{user_id}/claims?before=&limit=.
func (a *API) userClaims(w http.ResponseWriter, r *http.Request) {
	v, limit, err := listQuery(r, "before", claimsLimitDefault, claimsLimitMax)
	var before grab.HistoryKey
	if c, ok := v["before"]; ok && err == nil {
		before, err = parseHistoryCursor(c[0])
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	rows, err := a.svc.UserClaims(r.Context(), r.PathValue("user_id"), before, limit+1)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	resp := userClaimsResponse{Claims: make([]userClaimJSON, 0, min(len(rows), limit))}
	for i, c := range rows {
		if i == limit {
			next := historyCursor(rows[i-1].EnvelopeID)
			resp.NextBefore = &next
			break
		}
		u := userClaimJSON{EnvelopeID: c.EnvelopeID, SenderID: c.SenderID, PacketID: c.PacketID,
			AmountCents: c.AmountCents, OrderNo: OrderNo(c.OrderNo), GrabbedAt: Timestamp(c.GrabbedAt)}
		resp.Claims = append(resp.Claims, u)
	}
	writeJSON(w, http.StatusOK, resp)
}

type senderEnvelopesResponse struct {
	Envelopes  []statusResponse `json:"envelopes"`
	NextBefore *string          `json:"next_before"`
}

// senderEnvelopes serves GET /v1/senders/{sender_id}/envelopes?before=&limit=.
func (a *API) senderEnvelopes(w http.ResponseWriter, r *http.Request) {
	at, id, limit, err := newestFirstQuery(r, "s", envelopesLimitDefault, envelopesLimitMax)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	sts, err := a.svc.SenderEnvelopes(r.Context(), r.PathValue("sender_id"), at, id, limit+1)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	resp := senderEnvelopesResponse{Envelopes: make([]statusResponse, 0, min(len(sts), limit))}
	for i, st := range sts {
		if i == limit {
			next := timeCursor("s", sts[i-1].CreatedAt, sts[i-1].ID)
			resp.NextBefore = &next
			break
		}
		resp.Envelopes = append(resp.Envelopes, toStatusResponse(st))
	}
	writeJSON(w, http.StatusOK, resp)
}

type splitPacketJSON struct {
	PacketID    int64 `json:"packet_id"`
	AmountCents int64 `json:"amount_cents"`
}

type splitResponse struct {
	EnvelopeID int64             `json:"envelope_id"`
	Commitment string            `json:"commitment"`
	Salt       string            `json:"salt"`
	Packets    []splitPacketJSON `json:"packets"`
}

// split serves GET /v1/envelopes/{id}/split.
func (a *API) split(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if _, _, err := listQuery(r, "", 0, 0); err != nil {
		a.writeError(w, r, err)
		return
	}
	sp, err := a.svc.Split(r.Context(), id)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	resp := splitResponse{EnvelopeID: id, Commitment: sp.Commitment, Salt: sp.Salt,
		Packets: make([]splitPacketJSON, len(sp.PacketIDs))}
	for i, p := range sp.PacketIDs {
		resp.Packets[i] = splitPacketJSON{PacketID: p, AmountCents: sp.Amounts[i]}
	}
	writeJSON(w, http.StatusOK, resp)
}

// newestFirstQuery reads ?before=&limit= of a newest-first list: the key
// to start before (zero: from the newest) and the page size.
func newestFirstQuery(r *http.Request, list string, def, hi int64) (time.Time, int64, int, error) {
	v, limit, err := listQuery(r, "before", def, hi)
	if err != nil {
		return time.Time{}, 0, 0, err
	}
	c, ok := v["before"]
	if !ok {
		return time.Time{}, 0, limit, nil
	}
	at, id, err := parseTimeCursor(c[0], list)
	return at, id, limit, err
}

// listQuery reads a list's query strictly: the cursor parameter (none when
// cursor is "") and limit, each at most once, nothing else; limit from 1 to
// hi, def when absent.
func listQuery(r *http.Request, cursor string, def, hi int64) (url.Values, int, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, 0, badRequest("malformed query string: " + err.Error())
	}
	for name, vals := range v {
		if cursor == "" {
			return nil, 0, badRequest("unknown parameter " + strconv.Quote(name) + "; this takes none")
		}
		if name != cursor && name != "limit" {
			return nil, 0, badRequest("unknown parameter " + strconv.Quote(name) + "; use " + cursor + " and limit")
		}
		if len(vals) > 1 {
			return nil, 0, badRequest(name + ": given more than once")
		}
	}
	if cursor == "" {
		return v, 0, nil
	}
	limit, err := intParam(v, "limit", def, 1, hi)
	return v, int(limit), err
}

// OrderNo is a claim's order number, null for one recorded without it (a
// claim whose number was in use, see claim_conflicts; one from before order
// numbers), as the events feed answers it.
type OrderNo string

// MarshalJSON writes the number, or null.
func (o OrderNo) MarshalJSON() ([]byte, error) {
	if o == "" {
		return []byte("null"), nil
	}
	return []byte(strconv.Quote(string(o))), nil
}
