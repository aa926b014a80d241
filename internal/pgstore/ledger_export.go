package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/db/dbsqlc"
)

// Snapshot runs read with a Store whose queries all see one snapshot of the
// database (a REPEATABLE READ, READ ONLY transaction): pages read one after
// another agree with each other, whatever is written or deleted meanwhile.
// The snapshot holds back vacuum while it lasts. Only the Store's single
// queries may be used in read; one that begins a transaction of its own
// would leave the snapshot, and panics instead.
//
// The export has no time limit, and waits while its reader is slow (a
// pipe): a DBA's statement_timeout or idle_in_transaction_session_timeout
// would end it half-way, its output cut short, so the snapshot lifts both
// for itself.
func (s *Store) Snapshot(ctx context.Context, read func(*Store) error) error {
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	return pgx.BeginTxFunc(ctx, s.pool, opts, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.LocalNoStatementTimeout(ctx); err != nil {
			return fmt.Errorf("lift statement_timeout for the snapshot: %w", err)
		}
		if err := q.LocalIdleInTransactionTimeout(ctx, "0"); err != nil {
			return fmt.Errorf("lift idle_in_transaction_session_timeout for the snapshot: %w", err)
		}
		return read(&Store{q: q, senders: s.senders})
	})
}

// The rows of the reconciliation export, one page at a time.
type (
	FundedRow   = dbsqlc.ExportFundedRow
	ClaimedRow  = dbsqlc.ExportClaimedRow
	RefundedRow = dbsqlc.ExportRefundedRow
)

// FundedPage lists up to limit envelopes created in [since, until) after the
// key (afterAt, afterID), oldest first.
func (s *Store) FundedPage(ctx context.Context, since, until, afterAt time.Time, afterID int64, limit int) ([]FundedRow, error) {
	rows, err := s.q.ExportFunded(ctx, dbsqlc.ExportFundedParams{
		Since: since, Until: until, AfterAt: afterAt, AfterID: afterID, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("envelopes created from %s: %w", afterAt.Format(time.RFC3339Nano), err)
	}
	return rows, nil
}

// EnvelopeIDRange is the smallest and largest id of the envelopes created in
// [since, until); hi < lo when there are none.
func (s *Store) EnvelopeIDRange(ctx context.Context, since, until time.Time) (lo, hi int64, err error) {
	r, err := s.q.EnvelopeIDRange(ctx, dbsqlc.EnvelopeIDRangeParams{Since: since, Until: until})
	if err != nil {
		return 0, -1, fmt.Errorf("ids of the envelopes created from %s: %w", since.Format(time.RFC3339), err)
	}
	return r.Lo, r.Hi, nil
}

// ClaimedPage lists up to limit claims made in [since, until) of envelopes
// with ids in [lo, hi], after the key (afterEnvelope, afterPacket), by
// envelope and packet.
func (s *Store) ClaimedPage(ctx context.Context, since, until time.Time, lo, hi, afterEnvelope, afterPacket int64, limit int) ([]ClaimedRow, error) {
	rows, err := s.q.ExportClaimed(ctx, dbsqlc.ExportClaimedParams{
		LoID: lo, HiID: hi, AfterEnvelopeID: afterEnvelope, AfterPacketID: afterPacket,
		Since: since, Until: until, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("claims after envelope %d packet %d: %w", afterEnvelope, afterPacket, err)
	}
	return rows, nil
}

// RefundedPage lists up to limit envelopes settled in [since, until) with
// money returned, after the key (afterAt, afterID), oldest first.
func (s *Store) RefundedPage(ctx context.Context, since, until, afterAt time.Time, afterID int64, limit int) ([]RefundedRow, error) {
	rows, err := s.q.ExportRefunded(ctx, dbsqlc.ExportRefundedParams{
		Since: since, Until: until, AfterAt: afterAt, AfterID: afterID, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("envelopes settled from %s: %w", afterAt.Format(time.RFC3339Nano), err)
	}
	return rows, nil
}
