package pgstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
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

// applyClaims marks packets claimed and keeps envelopes.claimed_cents in
// step, in one statement. It is idempotent: a packet already claimed (by the
// same user, from an earlier attempt of this batch, or by anyone else) is
// left alone, as is a claim by a user who already holds a packet of the
// envelope. An order number some other packet already carries (possible only
// if Redis lost its day counter) is not written: the claim still counts, its
// order_no stays NULL and recordConflicts reports it. An envelope whose
// claimed cents reach its total is sold out:
// every packet is at least 1 cent, so that happens exactly when all are
// claimed.
//
// The same statement writes the events of what it changed: one
// packet.claimed per packet it claimed (the applied rows, so a replay of a
// committed batch writes none; the event names the packet, whose row holds
// the claim) and one envelope.sold_out per envelope it made sold out. The
// events come last (eventsTail), in grab order.
const applyClaims = `
WITH input AS (
    SELECT envelope_id, packet_id, user_id, claimed_at, nullif(order_no, '') AS order_no
    FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::timestamptz[], $5::text[])
        AS t(envelope_id, packet_id, user_id, claimed_at, order_no)
), applied AS (
    UPDATE packets p
    SET claimed_by = i.user_id, claimed_at = i.claimed_at,
        ` + orderNoGuarded + `
    FROM input i
    WHERE p.id = i.packet_id
      -- Wrapped so no index can serve it: the packet must be found by its
      -- id, one claim at a time, whatever the statistics say about how
      -- many packets are unclaimed.
      AND (p.envelope_id = i.envelope_id AND p.claimed_by IS NULL AND p.refunded_at IS NULL) IS TRUE
      ` + userGuard + `
    RETURNING p.id, p.envelope_id, p.amount_cents, p.claimed_at, p.order_no
), totals AS (
    SELECT envelope_id, sum(amount_cents)::bigint AS cents, count(*) AS n,
           count(*) FILTER (WHERE order_no IS NULL) AS no_order
    FROM applied GROUP BY envelope_id
), changed AS (
    UPDATE envelopes e
    SET claimed_cents = e.claimed_cents + t.cents,
        status = CASE WHEN e.status = 'open' AND e.claimed_cents + t.cents = e.total_cents
                      THEN 'sold_out' ELSE e.status END
    FROM totals t
    WHERE e.id = t.envelope_id
    RETURNING e.id, e.total_cents, e.count, t.n, t.no_order,
              e.status = 'sold_out' AND e.claimed_cents = e.total_cents AS sold_out
), new_events AS (
    SELECT 1 AS kind, a.claimed_at AS at, a.id AS ref, '` + EventPacketClaimed + `' AS type, a.envelope_id,
           a.id AS packet_id, NULL::jsonb AS data
    FROM applied a
    UNION ALL
    SELECT 2, now(), c.id, '` + EventEnvelopeSoldOut + `', c.id, NULL,
           jsonb_build_object('envelope_id', c.id, 'count', c.count, 'total_cents', c.total_cents)
    FROM changed c WHERE c.sold_out
)` + eventsTail + `
SELECT id, n, no_order, sold_out FROM changed`

// The two guards of applyClaims against what only a Redis that lost state
// produces: an order number already in use, a user already holding a packet
// of the envelope. Each costs an index probe per claim (about a fifth of the
// statement), so the batch is first sent without them (applyClaimsTrusting):
// the unique indexes then refuse such a batch as a whole, and it is sent
// again, guarded.
const (
	orderNoGuarded = `order_no = CASE WHEN EXISTS (SELECT 1 FROM packets o WHERE o.order_no = i.order_no)
                        THEN NULL ELSE i.order_no END`
	userGuard = `AND NOT EXISTS (SELECT 1 FROM packets q
                      WHERE q.envelope_id = i.envelope_id AND q.claimed_by = i.user_id)`
)

var applyClaimsTrusting = strings.NewReplacer(orderNoGuarded, "order_no = i.order_no", userGuard, "").
	Replace(applyClaims)

// recordConflicts stores, once, every claim of the batch that PostgreSQL does
// not now show as held by that user under that order number. Run after
// applyClaims in the same transaction, it finds exactly the claims that were
// not applied (or applied without their order number) and are not replays of
// ones applied before.
const recordConflicts = `
INSERT INTO claim_conflicts (envelope_id, packet_id, user_id, claimed_at, reason)
SELECT i.envelope_id, i.packet_id, i.user_id, i.claimed_at,
       CASE WHEN p.id IS NULL THEN 'unknown_packet'
            WHEN p.envelope_id <> i.envelope_id THEN 'wrong_envelope'
            WHEN p.refunded_at IS NOT NULL THEN 'packet_refunded'
            WHEN p.claimed_by IS NULL THEN 'user_holds_another_packet'
            WHEN p.claimed_by <> i.user_id THEN 'claimed_by_another_user'
            ELSE 'order_no_in_use' END
FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::timestamptz[], $5::text[])
    AS i(envelope_id, packet_id, user_id, claimed_at, order_no)
LEFT JOIN packets p ON p.id = i.packet_id
WHERE p.id IS NULL OR p.envelope_id <> i.envelope_id OR p.claimed_by IS DISTINCT FROM i.user_id
   OR p.order_no IS DISTINCT FROM nullif(i.order_no, '')
-- A conflict recorded before (this batch replayed after a crash) is returned
-- too, marked not new, so the flusher acts on it again whatever it did not
-- finish the first time; the no-op update is what makes it returned.
ON CONFLICT (envelope_id, packet_id, user_id) DO UPDATE SET reason = claim_conflicts.reason
RETURNING envelope_id, packet_id, user_id, claimed_at, reason, xmax = 0 AS new`

// ApplyClaims makes a batch of claims durable in one transaction. Running it
// again with the same batch changes nothing and reports nothing new.
func (s *Store) ApplyClaims(ctx context.Context, claims []Claim) (ApplyResult, error) {
	res, err := s.applyClaims(ctx, applyClaimsTrusting, [][]Claim{claims})
	if isUniqueViolation(err) {
		res, err = s.applyClaims(ctx, applyClaims, [][]Claim{claims})
	}
	if isUniqueViolation(err) {
		// Two claims of the batch are by one user in one envelope, or carry
		// one order number (only possible if Redis lost state): one statement
		// per claim lets the later one see the earlier and become a conflict.
		res, err = s.applyClaims(ctx, applyClaims, singles(claims))
	}
	return res, err
}

func (s *Store) applyClaims(ctx context.Context, statement string, groups [][]Claim) (ApplyResult, error) {
	var res ApplyResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = ApplyResult{}
		clean := make([]bool, len(groups))
		batch := &pgx.Batch{}
		// Each claim touches one packet, found by primary key. Statistics
		// taken while packets was small (a new deployment) made the planner
		// expect almost no unclaimed packets and scan them all once per
		// claim instead: a batch took tens of seconds, not milliseconds. No
		// plan for these statements should scan packets.
		batch.Queue(`SET LOCAL enable_seqscan = off`)
		for i, g := range groups {
			batch.Queue(statement, columns(g)...).Query(func(rows pgx.Rows) error {
				applied, noOrder, err := collectApplied(rows, &res)
				clean[i] = applied == len(g) && noOrder == 0
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
				batch.Queue(recordConflicts, columns(g)...).Query(func(rows pgx.Rows) error {
					return collectConflicts(rows, &res)
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

// collectApplied adds a statement's applied claims to res and returns how
// many it applied and how many of those went without their order number.
func collectApplied(rows pgx.Rows, res *ApplyResult) (applied, noOrder int, err error) {
	var id, n, lost int64
	var soldOut bool
	_, err = pgx.ForEachRow(rows, []any{&id, &n, &lost, &soldOut}, func() error {
		applied += int(n)
		noOrder += int(lost)
		if soldOut {
			res.SoldOut = append(res.SoldOut, id)
		}
		return nil
	})
	res.Applied += applied
	return applied, noOrder, err
}

func collectConflicts(rows pgx.Rows, res *ApplyResult) error {
	var c Conflict
	var isNew bool
	_, err := pgx.ForEachRow(rows, []any{&c.EnvelopeID, &c.PacketID, &c.UserID, &c.ClaimedAt, &c.Reason, &isNew}, func() error {
		res.Contradicted = append(res.Contradicted, c)
		if isNew {
			res.Conflicts = append(res.Conflicts, c)
		}
		return nil
	})
	return err
}

func columns(claims []Claim) []any {
	envs := make([]int64, len(claims))
	packets := make([]int64, len(claims))
	users := make([]string, len(claims))
	ats := make([]time.Time, len(claims))
	orders := make([]string, len(claims))
	for i, c := range claims {
		envs[i], packets[i], users[i], ats[i], orders[i] = c.EnvelopeID, c.PacketID, c.UserID, c.ClaimedAt, c.OrderNo
	}
	return []any{envs, packets, users, ats, orders}
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
