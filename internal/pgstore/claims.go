package pgstore

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/db/dbsqlc"
)

// Claim is a grab to make durable: user UserID holds packet PacketID of
// envelope EnvelopeID since ClaimedAt, under order number OrderNo ("" for
// none).
type Claim struct {
	EnvelopeID int64
	PacketID   int64
	UserID     string
	ClaimedAt  time.Time
	OrderNo    string
}

// Conflict is a claim that could not be applied without overwriting a
// different fact; it is recorded in claim_conflicts instead.
type Conflict struct {
	Claim
	Reason string
}

// ConflictOrderNo is the reason of a conflict that only lost the claim its
// order number (another packet has it); the claim itself was applied.
const ConflictOrderNo = "order_no_in_use"

// ApplyResult tells what one batch changed.
type ApplyResult struct {
	Applied   int        // packets newly marked claimed
	SoldOut   []int64    // envelopes whose last packet this batch claimed
	Conflicts []Conflict // newly recorded conflicts
	// Contradicted are the claims of the batch PostgreSQL contradicts,
	// recorded now or by an earlier attempt of the same batch.
	Contradicted []Conflict
}

// ApplyClaims makes a batch of claims durable in one transaction. Running it
// again with the same batch changes nothing and reports nothing new.
//
// The batch is first sent trusting Redis (dbsqlc ApplyClaims); a batch only a
// Redis that lost state produces (an order number already in use, a user
// already holding a packet of the envelope) is refused as a whole by the
// unique indexes and sent again with the guards that turn such claims into
// conflicts (ApplyClaimsGuarded).
func (s *Store) ApplyClaims(ctx context.Context, claims []Claim) (ApplyResult, error) {
	res, err := s.applyClaims(ctx, false, [][]Claim{claims})
	if isUniqueViolation(err) {
		res, err = s.applyClaims(ctx, true, [][]Claim{claims})
	}
	if isUniqueViolation(err) {
		// Two claims of the batch are by one user in one envelope, or carry
		// one order number (only possible if Redis lost state): one statement
		// per claim lets the later one see the earlier and become a conflict.
		res, err = s.applyClaims(ctx, true, singles(claims))
	}
	return res, err
}

// applyClaims applies the groups of claims, one statement each (trusting
// takes a single group), then records the conflicts of the groups that need
// it, in one transaction. The statements are the query layer's, queued in
// batches: the planner setting and the claim statements share one round
// trip, and the conflict statements, when any, one more.
func (s *Store) applyClaims(ctx context.Context, guarded bool, groups [][]Claim) (ApplyResult, error) {
	query := dbsqlc.ApplyClaims
	if guarded {
		query = dbsqlc.ApplyClaimsGuarded
	}
	var res ApplyResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = ApplyResult{}
		clean := make([]bool, len(groups))
		batch := &pgx.Batch{}
		batch.Queue(dbsqlc.ClaimPlan)
		for i, g := range groups {
			queue(batch, query, params(g)).Query(func(rows pgx.Rows) error {
				applied, err := pgx.CollectRows(rows, pgx.RowToStructByName[dbsqlc.ApplyClaimsRow])
				n, noOrder := collectApplied(applied, &res)
				clean[i] = n == len(g) && noOrder == 0
				return err
			})
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		// A group applied in full, every claim with its order number, holds
		// no conflict: only the others (replays after a crash, and claims
		// PostgreSQL contradicts) need the second statement. It runs after
		// the events were written, so it holds their position lock one round
		// trip longer; the order of positions does not depend on that, and
		// the normal path stays one round trip.
		batch = &pgx.Batch{}
		for i, g := range groups {
			if !clean[i] {
				queue(batch, dbsqlc.RecordConflicts, dbsqlc.RecordConflictsParams(params(g))).Query(func(rows pgx.Rows) error {
					conflicts, err := pgx.CollectRows(rows, pgx.RowToStructByName[dbsqlc.RecordConflictsRow])
					collectConflicts(conflicts, &res)
					return err
				})
			}
		}
		if batch.Len() == 0 {
			return nil
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return ApplyResult{}, fmt.Errorf("apply %d claims: %w", countClaims(groups), err)
	}
	return res, nil
}

// queue adds a query of the query layer to a batch, with the fields of its
// generated parameter struct as the arguments: sqlc declares them in the
// order of the query's parameters ($1, $2, ...).
func queue(b *pgx.Batch, query string, params any) *pgx.QueuedQuery {
	v := reflect.ValueOf(params)
	args := make([]any, v.NumField())
	for i := range args {
		args[i] = v.Field(i).Interface()
	}
	return b.Queue(query, args...)
}

// collectApplied adds a statement's applied claims to res and returns how
// many it applied and how many of those went without their order number.
func collectApplied(rows []dbsqlc.ApplyClaimsRow, res *ApplyResult) (applied, noOrder int) {
	for _, r := range rows {
		applied += int(r.N)
		noOrder += int(r.NoOrder)
		if r.SoldOut {
			res.SoldOut = append(res.SoldOut, r.ID)
		}
	}
	res.Applied += applied
	return applied, noOrder
}

func collectConflicts(rows []dbsqlc.RecordConflictsRow, res *ApplyResult) {
	for _, r := range rows {
		c := Conflict{
			Claim:  Claim{EnvelopeID: r.EnvelopeID, PacketID: r.PacketID, UserID: r.UserID, ClaimedAt: r.ClaimedAt},
			Reason: r.Reason,
		}
		res.Contradicted = append(res.Contradicted, c)
		if r.New {
			res.Conflicts = append(res.Conflicts, c)
		}
	}
}

// params lays a group of claims out as the claim statements take them: one
// array per column.
func params(claims []Claim) dbsqlc.ApplyClaimsParams {
	p := dbsqlc.ApplyClaimsParams{
		EnvelopeIds: make([]int64, len(claims)),
		PacketIds:   make([]int64, len(claims)),
		UserIds:     make([]string, len(claims)),
		ClaimedAts:  make([]time.Time, len(claims)),
		OrderNos:    make([]string, len(claims)),
	}
	for i, c := range claims {
		p.EnvelopeIds[i], p.PacketIds[i], p.UserIds[i], p.ClaimedAts[i], p.OrderNos[i] =
			c.EnvelopeID, c.PacketID, c.UserID, c.ClaimedAt, c.OrderNo
	}
	return p
}

func singles(claims []Claim) [][]Claim {
	out := make([][]Claim, len(claims))
	for i := range claims {
		out[i] = claims[i : i+1]
	}
	return out
}

func countClaims(groups [][]Claim) int {
	n := 0
	for _, g := range groups {
		n += len(g)
	}
	return n
}
