package grab

import (
	"encoding/json"
	"time"

	"redpacket/internal/envelope"
	"redpacket/internal/pgstore"
)

// The service answers in its own types: callers (the HTTP API) never see
// the storage shapes of pgstore or redisstore, so a change of table or
// script stays behind this package.

// Status is an envelope's state for the status endpoint: what PostgreSQL
// holds, with live counts from Redis while Redis holds the envelope.
type Status struct {
	ID              int64
	ShareCode       string // "" until it has one
	SenderID        string
	Status          envelope.Status
	TotalCents      int64
	Count           int
	GrabbedCount    int64
	GrabbedCents    int64
	RemainingCount  int64
	RefundedCents   int64
	CreatedAt       time.Time
	ExpiresAt       time.Time
	SettledAt       *time.Time // once settled
	ClosedAt        *time.Time // once the sender closed it
	Kind            envelope.Kind
	RecipientsCount int
	HasPassword     bool
	Greeting        string
	Metadata        json.RawMessage // a JSON object
	StartsAt        time.Time       // the creation time when none was given
	Best            *ClaimedPacket  // the luckiest grab, once shown (see bestShown)
}

// asCreated is stored metadata in the bytes the create answered it with:
// PostgreSQL's jsonb orders keys its own way and escapes nothing, and an
// idempotent create's answer rebuilt from the row must be the first one
// byte for byte. Metadata that does not read as the create wrote it (a
// DBA's edit) is given as stored.
func asCreated(stored json.RawMessage) json.RawMessage {
	var m map[string]string
	if json.Unmarshal(stored, &m) != nil || m == nil {
		return stored
	}
	b, err := json.Marshal(m)
	if err != nil {
		return stored
	}
	return b
}

// statusOf is the part of a Status an envelope's row gives.
func statusOf(e pgstore.Envelope) Status {
	st := Status{
		ID: e.ID, SenderID: e.SenderID, Status: e.Status, TotalCents: e.TotalCents, Count: e.Count,
		RefundedCents: e.RefundedCents, CreatedAt: e.CreatedAt, ExpiresAt: e.ExpiresAt,
		SettledAt: e.SettledAt, ClosedAt: e.ClosedAt, Kind: e.Kind, RecipientsCount: e.RecipientsCount,
		HasPassword: e.PasswordDigest != nil, Greeting: e.Greeting, Metadata: asCreated(e.Metadata), StartsAt: e.CreatedAt,
	}
	if e.ShareCode != nil {
		st.ShareCode = *e.ShareCode
	}
	if e.StartsAt != nil {
		st.StartsAt = *e.StartsAt
	}
	return st
}

// ClaimedPacket is a durable claim of an envelope: who holds which packet.
type ClaimedPacket struct {
	PacketID    int64
	UserID      string
	AmountCents int64
	OrderNo     string
	GrabbedAt   time.Time
}

func claimedPacketOf(c pgstore.ClaimedPacket) ClaimedPacket {
	return ClaimedPacket{PacketID: c.PacketID, UserID: c.UserID, AmountCents: c.AmountCents, OrderNo: c.OrderNo,
		GrabbedAt: c.GrabbedAt}
}

// UserClaim is a claim in a user's history.
type UserClaim struct {
	EnvelopeID  int64
	SenderID    string
	PacketID    int64
	AmountCents int64
	OrderNo     string // "" for a claim made before order numbers
	GrabbedAt   time.Time
}

func userClaimOf(c pgstore.UserClaim) UserClaim {
	u := UserClaim{EnvelopeID: c.EnvelopeID, SenderID: c.SenderID, PacketID: c.PacketID, AmountCents: c.AmountCents,
		GrabbedAt: c.ClaimedAt}
	if c.OrderNo != nil {
		u.OrderNo = *c.OrderNo
	}
	return u
}
