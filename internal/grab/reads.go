package grab

import (
	"context"
	"errors"
	"fmt"
	"time"

	"redpacket/internal/envelope"
	"redpacket/internal/pgstore"
)

// ErrNotSettled means the split of an envelope is not shown yet: it is shown
// once the envelope is settled, when nothing more can be handed out.
var ErrNotSettled = errors.New("envelope not settled yet")

// ClaimsPage is a page of an envelope's claims in hand-out order, and its
// luckiest grab once it is shown.
type ClaimsPage struct {
	Claims []ClaimedPacket
	Best   *ClaimedPacket
}

// Claims lists up to limit claims of envelope id handed out after the packet
// afterPacketID (0: from the first). Only durable claims are listed: those
// the flusher has written to PostgreSQL.
func (s *Service) Claims(ctx context.Context, id, afterPacketID int64, limit int) (ClaimsPage, error) {
	e, err := s.envelopeRow(ctx, id)
	if err != nil {
		return ClaimsPage{}, err
	}
	before := afterPacketID
	if before == 0 {
		before = maxKey
	}
	var page ClaimsPage
	claims, err := s.pg.EnvelopeClaims(ctx, id, before, limit)
	if err != nil {
		return ClaimsPage{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	page.Claims = make([]ClaimedPacket, len(claims))
	for i, c := range claims {
		page.Claims[i] = claimedPacketOf(c)
	}
	if page.Best, err = s.best(ctx, e); err != nil {
		return ClaimsPage{}, err
	}
	return page, nil
}

// maxKey is above every id: the key before which a first page starts.
const maxKey = int64(1<<63 - 1)

// best is the luckiest grab of e once it is shown, else nil.
func (s *Service) best(ctx context.Context, e pgstore.Envelope) (*ClaimedPacket, error) {
	if !bestShown(e) {
		return nil, nil
	}
	b, err := s.pg.BestClaim(ctx, e.ID)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if b == nil {
		return nil, nil
	}
	c := claimedPacketOf(*b)
	return &c, nil
}

// bestShown reports whether e's luckiest grab is shown: once every claim of
// it is in PostgreSQL, so that it can no longer change and the status
// answer, the claims list and the events agree: it sold out (the flusher
// wrote the last claim) or was settled (after closing or expiring).
//
// Fixed-kind envelopes, whose packets are all equal, have no luckiest grab
// (nor in the SQL function best_claim, which the events read).
func bestShown(e pgstore.Envelope) bool {
	if e.Kind == envelope.KindFixed {
		return false
	}
	switch e.Status {
	case envelope.StatusSoldOut, envelope.StatusSettled, envelope.StatusFailed:
		return true
	}
	return false
}

// HistoryKey is where a page of a user's history starts: before the
// envelope Envelope. Zero: the newest.
type HistoryKey struct{ Envelope int64 }

// UserClaims lists up to limit claims of a user newest envelope first (a
// user holds one packet per envelope), those before the key.
func (s *Service) UserClaims(ctx context.Context, userID string, before HistoryKey, limit int) ([]UserClaim, error) {
	if err := envelope.ValidateUserID("user_id", userID); err != nil {
		return nil, err
	}
	rows, err := s.pg.UserClaims(ctx, userID, historyStart(before), limit)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	out := make([]UserClaim, len(rows))
	for i, c := range rows {
		out[i] = userClaimOf(c)
	}
	return out, nil
}

// historyStart is the envelope before which a history page starts.
func historyStart(k HistoryKey) int64 {
	if k.Envelope != 0 {
		return k.Envelope
	}
	return maxKey
}

// farFuture is after every claim and envelope: the time before which a
// first page starts.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// SenderEnvelopes reports up to limit envelopes of a sender newest first:
// those before the key (beforeAt, beforeID), or the newest when beforeID is 0.
func (s *Service) SenderEnvelopes(ctx context.Context, senderID string, beforeAt time.Time, beforeID int64, limit int) ([]Status, error) {
	if err := envelope.ValidateUserID("sender_id", senderID); err != nil {
		return nil, err
	}
	if beforeID == 0 {
		beforeAt, beforeID = farFuture, maxKey
	}
	rows, err := s.pg.SenderEnvelopes(ctx, senderID, beforeAt, beforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	out := make([]Status, len(rows))
	for i, e := range rows {
		if out[i], err = s.status(ctx, e, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Split is an envelope's split commitment with its salt and packets in
// hand-out order, shown once the envelope is settled.
type Split struct {
	envelope.SplitCommitment
	PacketIDs []int64
	Amounts   []int64
}

// Split reports the split of envelope id: ErrNotSettled until it is
// settled, ErrNotFound for an unknown envelope or one created without a
// commitment.
func (s *Service) Split(ctx context.Context, id int64) (Split, error) {
	e, err := s.envelopeRow(ctx, id)
	if err != nil {
		return Split{}, err
	}
	if e.Status != envelope.StatusSettled && e.Status != envelope.StatusFailed {
		return Split{}, ErrNotSettled
	}
	c, ids, amounts, err := s.pg.Split(ctx, id)
	if errors.Is(err, pgstore.ErrNoCommitment) {
		return Split{}, fmt.Errorf("%w: envelope %d has no split commitment", ErrNotFound, id)
	}
	if err != nil {
		return Split{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return Split{SplitCommitment: c, PacketIDs: ids, Amounts: amounts}, nil
}

func (s *Service) envelopeRow(ctx context.Context, id int64) (pgstore.Envelope, error) {
	if id <= 0 {
		return pgstore.Envelope{}, ErrNotFound
	}
	e, err := s.pg.Envelope(ctx, id)
	if errors.Is(err, pgstore.ErrNotFound) {
		return pgstore.Envelope{}, ErrNotFound
	}
	if err != nil {
		return pgstore.Envelope{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return e, nil
}
