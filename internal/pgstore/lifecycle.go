package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/envelope"
)

// ErrWrongStatus means the envelope is not in a status the change applies
// to (for instance settled already); nothing was changed.
var ErrWrongStatus = errors.New("envelope is not in a status this change applies to")

// ErrLedger means an envelope's recorded cents disagree with its packets; the
// change was rolled back and the envelope needs an operator.
var ErrLedger = errors.New("envelope cents disagree with its packets")

// Settlement is what settling an envelope wrote.
type Settlement struct {
	Status        envelope.Status // settled, or failed for an envelope that never opened
	ClaimedCents  int64
	RefundedCents int64
	Refunded      int // packets refunded now
	// BestCorrected: the envelope row's luckiest grab was not its packets'
	// (see finish); the settlement wrote theirs.
	BestCorrected bool
}

// Unsettled lists a shard's envelopes whose state may live only in Redis:
// loading, open or expired (sold-out ones are wholly in PostgreSQL).
func (s *Store) Unsettled(ctx context.Context, shard int) ([]Envelope, error) {
	out, err := s.q.UnsettledEnvelopes(ctx, shard)
	if err != nil {
		return nil, fmt.Errorf("list unsettled envelopes of shard %d: %w", shard, err)
	}
	return out, nil
}

// MarkExpired records that an open envelope was closed and waits for its
// last claims before it is settled.
func (s *Store) MarkExpired(ctx context.Context, id int64) error {
	if err := s.q.MarkExpired(ctx, id); err != nil {
		return fmt.Errorf("mark envelope %d expired: %w", id, err)
	}
	return nil
}

// Settle refunds an envelope's unclaimed packets and records the refund, in
// one transaction, if its status is one of from. The envelope's cents are
// checked against its packets first; on a mismatch nothing is written and
// ErrLedger is returned.
func (s *Store) Settle(ctx context.Context, id int64, now time.Time, from ...envelope.Status) (Settlement, error) {
	return s.finish(ctx, id, now, envelope.StatusSettled, from)
}

// FailLoading settles an envelope that never finished loading as failed:
// every packet goes back to the sender. Only for envelopes still loading
// that Redis shows were never offered.
func (s *Store) FailLoading(ctx context.Context, id int64, now time.Time) (Settlement, error) {
	return s.finish(ctx, id, now, envelope.StatusFailed, []envelope.Status{envelope.StatusLoading})
}

// settleLockTimeout bounds a settlement's waits on locks (dbsqlc.LocalLockTimeout
// says why); its statements themselves have no time limit: bounded work
// that must finish, whatever statement_timeout a DBA set.
const settleLockTimeout = 5 * time.Second

func (s *Store) finish(ctx context.Context, id int64, now time.Time, to envelope.Status, from []envelope.Status) (Settlement, error) {
	var out Settlement
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.LocalNoStatementTimeout(ctx); err != nil {
			return err
		}
		if err := q.LocalLockTimeout(ctx, strconv.FormatInt(settleLockTimeout.Milliseconds(), 10)); err != nil {
			return err
		}
		row, err := q.LockForSettlement(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if !slices.Contains(from, row.Status) {
			return fmt.Errorf("%w: it is %s", ErrWrongStatus, row.Status)
		}
		refunded, err := q.RefundUnclaimed(ctx, dbsqlc.RefundUnclaimedParams{EnvelopeID: id, RefundedAt: now})
		if err != nil {
			return err
		}
		sums, err := q.PacketSums(ctx, id)
		if err != nil {
			return err
		}
		if sums.ClaimedCents != row.ClaimedCents || sums.ClaimedCents+sums.RefundedCents != row.TotalCents {
			return fmt.Errorf("%w: claimed_cents %d, claimed packets %d, refunded packets %d, total %d",
				ErrLedger, row.ClaimedCents, sums.ClaimedCents, sums.RefundedCents, row.TotalCents)
		}
		// The luckiest grab the claims kept on the row should be the one the
		// packets show; a flusher older than the row's best columns, still
		// running after the upgrade, would have left it behind. The packets
		// are the record: the settlement writes their best, and says so.
		bestCorrected := sums.BestPacketID != row.BestPacketID
		// Counted with the settlement, whoever settles (metrics read it);
		// before the last statement, so its lock precedes the event lock.
		err = q.AddSettlementTotals(ctx, dbsqlc.AddSettlementTotalsParams{
			Status: to.String(), ClaimedCents: sums.ClaimedCents, RefundedCents: sums.RefundedCents,
		})
		if err != nil {
			return err
		}
		// Last, with its event: the backend refunds the sender from it.
		_, err = q.RecordSettlement(ctx, dbsqlc.RecordSettlementParams{
			ID: id, Status: to, RefundedCents: sums.RefundedCents, SettledAt: now,
			BestPacketID: sums.BestPacketID, BestAmountCents: sums.BestAmountCents,
		})
		out = Settlement{Status: to, ClaimedCents: sums.ClaimedCents, RefundedCents: sums.RefundedCents, Refunded: int(refunded),
			BestCorrected: bestCorrected}
		return err
	})
	if err != nil {
		return Settlement{}, fmt.Errorf("settle envelope %d as %s: %w", id, to, err)
	}
	return out, nil
}

// Suspend marks an envelope suspended with the reason, if it is loading,
// open, sold out or expired; changed is false when it was not (and then no
// event is written).
func (s *Store) Suspend(ctx context.Context, id int64, reason string, now time.Time) (changed bool, err error) {
	n, err := s.q.Suspend(ctx, dbsqlc.SuspendParams{ID: id, Reason: reason, SuspendedAt: now})
	if err != nil {
		return false, fmt.Errorf("suspend envelope %d: %w", id, err)
	}
	return n == 1, nil
}

// Reopen moves a suspended envelope back to open (or sold out when nothing is
// left), after an operator reloaded it into Redis.
func (s *Store) Reopen(ctx context.Context, id int64) (envelope.Status, error) {
	status, err := s.q.Reopen(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("reopen envelope %d: %w", id, ErrWrongStatus)
	}
	if err != nil {
		return "", fmt.Errorf("reopen envelope %d: %w", id, err)
	}
	return status, nil
}

// HeldClaim is a packet PostgreSQL shows as claimed.
type HeldClaim struct {
	UserID      string
	PacketID    int64
	AmountCents int64
	ClaimedAt   time.Time
	OrderNo     string // "" when none was recorded
}

// HeldClaims lists an envelope's claimed packets.
func (s *Store) HeldClaims(ctx context.Context, id int64) ([]HeldClaim, error) {
	rows, err := s.q.HeldClaims(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("claims of envelope %d: %w", id, err)
	}
	out := make([]HeldClaim, len(rows))
	for i, r := range rows {
		out[i] = HeldClaim(r)
	}
	return out, nil
}

// UserClaim returns the packet a user holds in an envelope (ErrNotFound when
// none).
func (s *Store) UserClaim(ctx context.Context, id int64, userID string) (HeldClaim, error) {
	c, err := s.q.UserClaim(ctx, dbsqlc.UserClaimParams{EnvelopeID: id, UserID: userID})
	if errors.Is(err, pgx.ErrNoRows) {
		return HeldClaim{}, ErrNotFound
	}
	if err != nil {
		return HeldClaim{}, fmt.Errorf("claim of user in envelope %d: %w", id, err)
	}
	return HeldClaim(c), nil
}

// EnvelopeCents is an envelope's claimed cents and status, for comparing with
// Redis after a batch.
type EnvelopeCents struct {
	ClaimedCents int64
	Status       envelope.Status
}

// ClaimedCents reads the claimed cents and status of several envelopes.
func (s *Store) ClaimedCents(ctx context.Context, ids []int64) (map[int64]EnvelopeCents, error) {
	rows, err := s.q.ClaimedCents(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("claimed cents: %w", err)
	}
	out := make(map[int64]EnvelopeCents, len(ids))
	for _, r := range rows {
		out[r.ID] = EnvelopeCents{ClaimedCents: r.ClaimedCents, Status: r.Status}
	}
	return out, nil
}

// Epochs returns the token recorded for each shard ("" for none yet).
func (s *Store) Epochs(ctx context.Context, shards int) ([]string, error) {
	rows, err := s.q.Epochs(ctx)
	if err != nil {
		return nil, fmt.Errorf("read shard epochs: %w", err)
	}
	out := make([]string, shards)
	for _, r := range rows {
		if int(r.Shard) < shards {
			out[r.Shard] = r.Epoch
		}
	}
	return out, nil
}

// SetEpoch records a shard's token.
//
// It replaces only the token the caller read (was; "" for none yet), so two
// flushers that both found a shard's data lost agree on one new token: the
// second is told ErrWrongStatus and leaves the shard to the next round.
func (s *Store) SetEpoch(ctx context.Context, shard int, was, epoch string) error {
	n, err := s.q.SetEpoch(ctx, dbsqlc.SetEpochParams{Shard: int16(shard), Was: was, Epoch: epoch})
	if err != nil {
		return fmt.Errorf("record epoch of shard %d: %w", shard, err)
	}
	if n != 1 {
		return fmt.Errorf("record epoch of shard %d: %w: changed by another flusher", shard, ErrWrongStatus)
	}
	return nil
}

// CheckLedger returns ErrLedger, with the figures, when an envelope's
// recorded cents disagree with its packets as its settlement would check
// them (its claimed cents with the claimed packets', its total with the
// claimed and refunded packets' once every unclaimed one is refunded): no
// settlement of it could finish until the ledger is repaired.
func (s *Store) CheckLedger(ctx context.Context, id int64) error {
	r, err := s.q.LedgerSums(ctx, id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ErrNotFound
	case err != nil:
		return fmt.Errorf("ledger of envelope %d: %w", id, err)
	case r.ClaimedCents != r.PacketsClaimedCents || r.TotalCents != r.PacketsSettledCents:
		return fmt.Errorf("%w: claimed_cents %d, claimed packets %d, total %d, claimed and refunded packets %d",
			ErrLedger, r.ClaimedCents, r.PacketsClaimedCents, r.TotalCents, r.PacketsSettledCents)
	}
	return nil
}
