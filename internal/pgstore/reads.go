package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/envelope"
)

// ErrNoCommitment means an envelope has no split commitment: it was created
// before commitments were recorded, or does not exist.
var ErrNoCommitment = errors.New("no split commitment")

// ClaimedPacket is a claimed packet as the reads report it.
type ClaimedPacket struct {
	PacketID    int64     `json:"packet_id"`
	UserID      string    `json:"user_id"`
	AmountCents int64     `json:"amount_cents"`
	OrderNo     string    `json:"order_no"`
	GrabbedAt   time.Time `json:"grabbed_at"`
}

// UserClaim is a claim in a user's history.
type UserClaim = dbsqlc.UserClaimsPageRow

// EnvelopeClaims lists up to limit claims of an envelope in hand-out order,
// those handed out after the packet beforePacketID (packets go out in
// descending id order, so they have smaller ids).
func (s *Store) EnvelopeClaims(ctx context.Context, envelopeID, beforePacketID int64, limit int) ([]ClaimedPacket, error) {
	rows, err := s.q.EnvelopeClaimsPage(ctx, dbsqlc.EnvelopeClaimsPageParams{
		EnvelopeID: envelopeID, BeforePacketID: beforePacketID, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("claims of envelope %d: %w", envelopeID, err)
	}
	out := make([]ClaimedPacket, len(rows))
	for i, r := range rows {
		out[i] = ClaimedPacket{PacketID: r.PacketID, UserID: r.UserID, AmountCents: r.AmountCents, GrabbedAt: r.ClaimedAt}
		if r.OrderNo != nil {
			out[i].OrderNo = *r.OrderNo
		}
	}
	return out, nil
}

// BestClaim is an envelope's luckiest grab (the SQL function best_claim,
// which the events read too); nil when nothing was claimed.
func (s *Store) BestClaim(ctx context.Context, envelopeID int64) (*ClaimedPacket, error) {
	raw, err := s.q.BestClaim(ctx, envelopeID)
	if err != nil {
		return nil, fmt.Errorf("best claim of envelope %d: %w", envelopeID, err)
	}
	var c *ClaimedPacket
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("best claim of envelope %d: %w", envelopeID, err)
	}
	return c, nil
}

// UserClaims lists up to limit claims of a user newest envelope first,
// those of envelopes before beforeEnvelopeID.
func (s *Store) UserClaims(ctx context.Context, userID string, beforeEnvelopeID int64, limit int) ([]UserClaim, error) {
	rows, err := s.q.UserClaimsPage(ctx, dbsqlc.UserClaimsPageParams{
		UserID: userID, BeforeEnvelopeID: beforeEnvelopeID, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("claims of user %q: %w", userID, err)
	}
	return rows, nil
}

// SenderEnvelopes lists up to limit envelopes of a sender newest first,
// those before the key (beforeAt, beforeID).
func (s *Store) SenderEnvelopes(ctx context.Context, senderID string, beforeAt time.Time, beforeID int64, limit int) ([]Envelope, error) {
	rows, err := s.q.SenderEnvelopesPage(ctx, dbsqlc.SenderEnvelopesPageParams{
		SenderID: senderID, BeforeAt: beforeAt, BeforeID: beforeID, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("envelopes of sender %q: %w", senderID, err)
	}
	return rows, nil
}

// Commitment reads an envelope's split commitment alone (the create answer
// rebuilt for a repeated idempotent create); ErrNoCommitment when it has none.
func (s *Store) Commitment(ctx context.Context, envelopeID int64) (string, error) {
	row, err := s.q.SplitCommitmentOf(ctx, envelopeID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("split of envelope %d: %w", envelopeID, ErrNoCommitment)
	}
	if err != nil {
		return "", fmt.Errorf("split commitment of envelope %d: %w", envelopeID, err)
	}
	return row.Commitment, nil
}

// Split reads an envelope's split commitment and its packets in hand-out
// order.
func (s *Store) Split(ctx context.Context, envelopeID int64) (c envelope.SplitCommitment, ids, amounts []int64, err error) {
	row, err := s.q.SplitCommitmentOf(ctx, envelopeID)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, nil, nil, fmt.Errorf("split of envelope %d: %w", envelopeID, ErrNoCommitment)
	}
	if err != nil {
		return c, nil, nil, fmt.Errorf("split commitment of envelope %d: %w", envelopeID, err)
	}
	packets, err := s.q.SplitPackets(ctx, envelopeID)
	if err != nil {
		return c, nil, nil, fmt.Errorf("packets of envelope %d: %w", envelopeID, err)
	}
	ids, amounts = make([]int64, len(packets)), make([]int64, len(packets))
	for i, p := range packets {
		ids[i], amounts[i] = p.ID, p.AmountCents
	}
	return envelope.SplitCommitment{Salt: row.Salt, Commitment: row.Commitment}, ids, amounts, nil
}
