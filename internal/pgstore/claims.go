package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/db/dbsqlc"
)

// Claim is a grab to make durable: user UserID holds packet PacketID of
// envelope EnvelopeID since ClaimedAt, under order number OrderNo ("" for
// none). AmountCents is the packet's amount as the grab was told it (0:
// not known, which sends the claim's batch the guarded way); a claim is
// written with the packet's own amount, never a different one.
type Claim struct {
	EnvelopeID  int64
	PacketID    int64
	UserID      string
	AmountCents int64
	ClaimedAt   time.Time
	OrderNo     string
}

// Conflict is a claim that could not be applied without overwriting a
// different fact; it is recorded in claim_conflicts instead.
type Conflict struct {
	Claim
	Reason string
}

// ConflictOrderNo is the reason of a conflict that only lost the claim its
// order number (another packet has it); the claim itself was applied.
// Every other reason (regranted_to_holder among them: the holder's own
// packet granted again under a new order number) means Redis lost state.
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
// The batch is first appended trusting Redis (appendClaims: COPY, then one
// statement that checks each claim against its packet and adds them to
// their envelopes). A batch only a Redis that lost state produces (a packet
// claimed already, an order number in use, a user already holding a packet
// of the envelope, a packet refunded or not of the envelope), or a replay
// after a crash, is refused as a whole and sent again with the guards that
// skip what is applied and turn the rest into conflicts
// (ApplyClaimsGuarded).
func (s *Store) ApplyClaims(ctx context.Context, claims []Claim) (ApplyResult, error) {
	var res ApplyResult
	var err error
	trusted := amountsKnown(claims)
	if trusted {
		res, err = s.appendClaims(ctx, claims)
	}
	if !trusted || errors.Is(err, errRefused) || isUniqueViolation(err) || isCheckViolation(err) {
		res, err = s.applyClaims(ctx, [][]Claim{claims})
	}
	if isUniqueViolation(err) {
		// Two claims of the batch are by one user in one envelope, or carry
		// one order number (only possible if Redis lost state): one statement
		// per claim lets the later one see the earlier and become a conflict.
		res, err = s.applyClaims(ctx, singles(claims))
	}
	return res, err
}

// errRefused: a trusted batch held a claim its packet contradicts.
var errRefused = errors.New("a claim of the batch does not match its packet")

func amountsKnown(claims []Claim) bool {
	for _, c := range claims {
		if c.AmountCents <= 0 {
			return false
		}
	}
	return true
}

// appendClaims COPYs a batch into claims and adds it to its envelopes
// (dbsqlc AddClaims), in one transaction that commits only if every claim
// of the batch matched its packet: errRefused (or the unique indexes', or
// an envelope's check, error) otherwise, with nothing written.
func (s *Store) appendClaims(ctx context.Context, claims []Claim) (ApplyResult, error) {
	open, err := s.copyClaims(ctx, claims)
	var res ApplyResult
	if err == nil {
		res, err = open.commit(ctx)
	}
	if err != nil {
		return ApplyResult{}, fmt.Errorf("append %d claims: %w", len(claims), err)
	}
	return res, nil
}

// copiedClaims is a transaction holding a batch COPYed into claims and not
// yet added to its envelopes.
type copiedClaims struct {
	tx     pgx.Tx
	claims []Claim
}

// copyLockTimeout bounds a claim transaction's waits on locks
// (dbsqlc.LocalLockTimeout says why). Without a Redis that lost state
// or a DBA's lock, nothing waits at all.
const copyLockTimeout = time.Second

// copyClaims begins a transaction and COPYs claims into it; on an error
// nothing stays open.
func (s *Store) copyClaims(ctx context.Context, claims []Claim) (*copiedClaims, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	q := s.q.WithTx(tx)
	err = q.LocalLockTimeout(ctx, strconv.FormatInt(copyLockTimeout.Milliseconds(), 10))
	var rows []dbsqlc.CopyClaimsParams
	if err == nil {
		rows, err = s.withSenders(ctx, q, claims)
	}
	if err == nil {
		_, err = q.CopyClaims(ctx, rows)
	}
	if err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return &copiedClaims{tx: tx, claims: claims}, nil
}

// commit adds the copied claims to their envelopes (the planner setting and
// the statement in one round trip) and commits, only if every claim matched
// its packet (errRefused otherwise); on an error it rolls back.
func (c *copiedClaims) commit(ctx context.Context) (ApplyResult, error) {
	var res ApplyResult
	batch := &pgx.Batch{}
	batch.Queue(dbsqlc.ClaimPlan)
	queue(batch, dbsqlc.AddClaims, addParams(c.claims)).Query(func(rows pgx.Rows) error {
		applied, err := pgx.CollectRows(rows, pgx.RowToStructByName[dbsqlc.AddClaimsRow])
		collectApplied(applied, &res)
		return err
	})
	err := c.tx.SendBatch(ctx, batch).Close()
	if err == nil && res.Applied != len(c.claims) {
		err = errRefused
	}
	if err == nil {
		err = c.tx.Commit(ctx)
	}
	if err != nil {
		_ = c.tx.Rollback(ctx)
		return ApplyResult{}, err
	}
	return res, nil
}

// rollback abandons the copied claims.
func (c *copiedClaims) rollback(ctx context.Context) { _ = c.tx.Rollback(ctx) }

// applyClaims applies the groups of claims guarded, one statement each,
// then records the conflicts of the groups that need it, in one
// transaction. The statements are the query layer's, queued in batches: the
// planner setting and the claim statements share one round trip, and the
// conflict statements, when any, one more.
func (s *Store) applyClaims(ctx context.Context, groups [][]Claim) (ApplyResult, error) {
	var res ApplyResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = ApplyResult{}
		clean := make([]bool, len(groups))
		batch := &pgx.Batch{}
		batch.Queue(dbsqlc.ClaimPlan)
		for i, g := range groups {
			queue(batch, dbsqlc.ApplyClaimsGuarded, params(g)).Query(func(rows pgx.Rows) error {
				applied, err := pgx.CollectRows(rows, pgx.RowToStructByName[dbsqlc.ApplyClaimsGuardedRow])
				converted := make([]dbsqlc.AddClaimsRow, len(applied))
				for j, r := range applied {
					converted[j] = dbsqlc.AddClaimsRow(r)
				}
				n, noOrder := collectApplied(converted, &res)
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
		// trip longer; the order of positions does not depend on that.
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
	return b.Queue(query, args(params)...)
}

// args lists the fields of a generated parameter struct in order.
func args(params any) []any {
	v := reflect.ValueOf(params)
	out := make([]any, v.NumField())
	for i := range out {
		out[i] = v.Field(i).Interface()
	}
	return out
}

// collectApplied adds a statement's applied claims to res and returns how
// many it applied and how many of those went without their order number.
func collectApplied(rows []dbsqlc.AddClaimsRow, res *ApplyResult) (applied, noOrder int) {
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

// copyRows lays a batch out as CopyClaims takes it: one row per claim.
func copyRows(claims []Claim) []dbsqlc.CopyClaimsParams {
	rows := make([]dbsqlc.CopyClaimsParams, len(claims))
	for i, c := range claims {
		rows[i] = dbsqlc.CopyClaimsParams{EnvelopeID: c.EnvelopeID, PacketID: c.PacketID, UserID: c.UserID,
			AmountCents: c.AmountCents, ClaimedAt: c.ClaimedAt}
		if c.OrderNo != "" {
			rows[i].OrderNo = &claims[i].OrderNo
		}
	}
	return rows
}

// addParams lays a batch out as AddClaims takes it: one run per envelope,
// in ascending envelope id, with its count and its claims without an order
// number, and the packets and amounts of the runs one after another, each
// run's in grab order: the order of its claim events. Grabs of one
// millisecond (a coalesced call's) are in hand-out order, highest packet id
// first, as the pool hands them out.
func addParams(claims []Claim) dbsqlc.AddClaimsParams {
	sorted := make([]*Claim, len(claims))
	for i := range claims {
		sorted[i] = &claims[i]
	}
	// Times compare as PostgreSQL stores them, to the microsecond (pgx
	// truncates), so a run's order is the claims' (claimed_at, packet_id
	// descending).
	slices.SortFunc(sorted, func(a, b *Claim) int {
		return cmp.Or(cmp.Compare(a.EnvelopeID, b.EnvelopeID),
			a.ClaimedAt.Truncate(time.Microsecond).Compare(b.ClaimedAt.Truncate(time.Microsecond)),
			cmp.Compare(b.PacketID, a.PacketID))
	})
	p := dbsqlc.AddClaimsParams{PacketIds: make([]int64, len(sorted)), Amounts: make([]int64, len(sorted))}
	for i, c := range sorted {
		p.PacketIds[i], p.Amounts[i] = c.PacketID, c.AmountCents
		last := len(p.RunEnvelopeIds) - 1
		if last < 0 || p.RunEnvelopeIds[last] != c.EnvelopeID {
			p.RunEnvelopeIds = append(p.RunEnvelopeIds, c.EnvelopeID)
			p.RunCounts = append(p.RunCounts, 0)
			p.RunNoOrders = append(p.RunNoOrders, 0)
			last++
		}
		p.RunCounts[last]++
		if c.OrderNo == "" {
			p.RunNoOrders[last]++
		}
	}
	return p
}

// params lays a group of claims out as the guarded statements take them:
// one array per column.
func params(claims []Claim) dbsqlc.ApplyClaimsGuardedParams {
	p := dbsqlc.ApplyClaimsGuardedParams{
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
