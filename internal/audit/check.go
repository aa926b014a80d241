package audit

import (
	"fmt"

	"redpacket/internal/envelope"
)

// Check names: stable, so dashboards and scripts can match on them.
const (
	CheckPacketCount        = "packet_count"         // packets of the envelope != envelopes.count
	CheckPacketSum          = "packet_sum"           // packet amounts do not add up to total_cents
	CheckClaimedCents       = "claimed_cents"        // envelopes.claimed_cents != sum of claimed packets
	CheckRefundedCents      = "refunded_cents"       // envelopes.refunded_cents != sum of refunded packets
	CheckClaimedAndRefunded = "claimed_and_refunded" // a packet is both claimed and refunded
	CheckUserTwice          = "user_twice"           // a user holds two packets of one envelope
	CheckClaimedPlusRefund  = "claimed_plus_refunded"
	CheckUnaccounted        = "unaccounted_packets" // a settled or failed envelope has a packet neither claimed nor refunded
	CheckSettledAt          = "settled_at"          // a settled or failed envelope has no settled_at
	CheckSoldOutStatus      = "sold_out_status"     // status sold_out does not match claimed == total
	CheckFailedClaimed      = "failed_claimed"      // a failed envelope (never offered) has claims
	CheckRedisMissing       = "redis_missing"       // an open or expired envelope has no meta in Redis
	CheckRedisMeta          = "redis_meta"          // the meta in Redis cannot be read
	CheckRedisBehind        = "redis_behind"        // Redis counts fewer grabbed cents than PostgreSQL claims
	CheckRedisPool          = "redis_pool"          // pool + claims in Redis != count while open
	CheckRedisClaims        = "redis_claims"        // a settled envelope's claims in Redis differ from PostgreSQL's
	CheckConflict           = "conflict"            // a claim_conflicts row: an answered grab not paid, or corruption
	CheckFixedAmounts       = "fixed_amounts"       // a fixed envelope's packets are not all total_cents / count
	CheckRecipientsCount    = "recipients_count"    // recipients_count differs from the envelope's recipient rows
	CheckNotRecipient       = "not_recipient"       // a packet of an envelope with recipients is held by another user
	CheckBeforeStart        = "before_start"        // a packet was claimed before the envelope's starts_at
	CheckStrayClaims        = "stray_claims"        // a claims row names no packet of its envelope, or another amount
	CheckOrphanRows         = "orphan_rows"         // rows keyed by an envelope that does not exist
)

// envelopeRow is an envelope as stored and the aggregate of its packets, read
// in one statement (see pageColumns).
type envelopeRow struct {
	ID            int64
	Status        envelope.Status
	Count         int64
	TotalCents    int64
	ClaimedCents  int64 // envelopes.claimed_cents
	RefundedCents int64 // envelopes.refunded_cents
	HasSettledAt  bool
	Packets       packetTotals

	Kind            envelope.Kind
	RecipientsCount int64 // envelopes.recipients_count
	RecipientRows   int64 // rows of envelope_recipients
}

// packetTotals aggregates one envelope's packets.
type packetTotals struct {
	N                  int64 // packets
	Cents              int64 // sum of all amounts
	ClaimedN           int64 // packets with claimed_by
	ClaimedCents       int64
	RefundedN          int64 // packets with refunded_at
	RefundedCents      int64
	ClaimedAndRefunded int64 // packets with both
	UsersTwice         int64 // claimed packets beyond each user's first
	MinCents, MaxCents int64 // smallest and largest amount
	NotRecipient       int64 // claimed by a user not among the recipients (when there are some)
	BeforeStart        int64 // claimed before starts_at
	StrayClaims        int64 // claims rows with no packet of the envelope, or another amount than the packet's
}

// final reports whether an envelope's money can no longer move.
func final(status envelope.Status) bool {
	return status == envelope.StatusSettled || status == envelope.StatusFailed
}

// checkEnvelope returns the invariants one envelope breaks, in a fixed order.
// It is pure so that every check, including those the schema's constraints
// make impossible to stage in a test database, can be tested on a made-up row.
func checkEnvelope(r envelopeRow) []Violation {
	var out []Violation
	add := func(check, format string, args ...any) {
		out = append(out, Violation{EnvelopeID: r.ID, Check: check, Detail: fmt.Sprintf(format, args...)})
	}
	checkPackets(r, add)
	checkMoney(r, add)
	if final(r.Status) {
		checkFinal(r, add)
	}
	checkStatus(r, add)
	checkGates(r, add)
	return out
}

// checkGates checks the packets against how the envelope was offered: a
// fixed split, its recipients, its start.
func checkGates(r envelopeRow, add addFunc) {
	p := r.Packets
	if r.Kind == envelope.KindFixed && p.N > 0 && (p.MinCents != p.MaxCents || p.MaxCents*r.Count != r.TotalCents) {
		add(CheckFixedAmounts, "fixed: packets of %d to %d cents, want %d / %d each", p.MinCents, p.MaxCents, r.TotalCents, r.Count)
	}
	if r.RecipientsCount != r.RecipientRows {
		add(CheckRecipientsCount, "recipients_count is %d, %d recipients stored", r.RecipientsCount, r.RecipientRows)
	}
	if p.NotRecipient > 0 {
		add(CheckNotRecipient, "%d packets held by users who are not recipients", p.NotRecipient)
	}
	if p.BeforeStart > 0 {
		add(CheckBeforeStart, "%d packets claimed before starts_at", p.BeforeStart)
	}
}

type addFunc func(check, format string, args ...any)

// checkPackets compares the packets with the envelope they were split from
// and with each other.
func checkPackets(r envelopeRow, add addFunc) {
	p := r.Packets
	if p.N != r.Count {
		add(CheckPacketCount, "%d packets, count is %d", p.N, r.Count)
	}
	if p.Cents != r.TotalCents {
		add(CheckPacketSum, "packets sum to %d cents, total_cents is %d", p.Cents, r.TotalCents)
	}
	if p.StrayClaims > 0 {
		add(CheckStrayClaims, "%d claims rows name no packet of the envelope or another amount than the packet's", p.StrayClaims)
	}
	if p.ClaimedAndRefunded > 0 {
		add(CheckClaimedAndRefunded, "%d packets both claimed and refunded", p.ClaimedAndRefunded)
	}
	if p.UsersTwice > 0 {
		add(CheckUserTwice, "%d packets held by a user who already holds one of this envelope", p.UsersTwice)
	}
}

// checkMoney compares the envelope's running totals with its packets.
func checkMoney(r envelopeRow, add addFunc) {
	p := r.Packets
	if r.ClaimedCents != p.ClaimedCents {
		add(CheckClaimedCents, "claimed_cents is %d, claimed packets sum to %d", r.ClaimedCents, p.ClaimedCents)
	}
	if r.RefundedCents != p.RefundedCents {
		add(CheckRefundedCents, "refunded_cents is %d, refunded packets sum to %d", r.RefundedCents, p.RefundedCents)
	}
	if r.ClaimedCents+r.RefundedCents > r.TotalCents {
		add(CheckClaimedPlusRefund, "claimed %d + refunded %d cents exceed total %d",
			r.ClaimedCents, r.RefundedCents, r.TotalCents)
	}
}

// checkFinal checks that a settled or failed envelope accounts for every cent
// and every packet.
func checkFinal(r envelopeRow, add addFunc) {
	p := r.Packets
	if sum := r.ClaimedCents + r.RefundedCents; sum < r.TotalCents {
		add(CheckClaimedPlusRefund, "%s: claimed %d + refunded %d = %d cents, total is %d",
			r.Status, r.ClaimedCents, r.RefundedCents, sum, r.TotalCents)
	}
	if open := p.N - p.ClaimedN - p.RefundedN + p.ClaimedAndRefunded; open != 0 {
		add(CheckUnaccounted, "%s: %d packets neither claimed nor refunded", r.Status, open)
	}
	if !r.HasSettledAt {
		add(CheckSettledAt, "%s without settled_at", r.Status)
	}
}

// checkStatus checks that the status agrees with the money. Only an open
// envelope must already say sold_out when everything is claimed: the flusher
// moves open and expired to sold_out in the transaction that claims the last
// packet, but a loading or suspended envelope keeps its status (loading
// becomes sold_out when marked loaded, a suspended one settles), and an
// expired one claimed in full by an earlier version (which moved only open
// ones) stays expired until it is settled.
func checkStatus(r envelopeRow, add addFunc) {
	soldOut := r.ClaimedCents == r.TotalCents
	switch {
	case r.Status == envelope.StatusSoldOut && !soldOut:
		add(CheckSoldOutStatus, "sold_out with %d of %d cents claimed", r.ClaimedCents, r.TotalCents)
	case r.Status == envelope.StatusOpen && soldOut:
		add(CheckSoldOutStatus, "open with all %d cents claimed", r.TotalCents)
	case r.Status == envelope.StatusFailed && (r.ClaimedCents != 0 || r.Packets.ClaimedN != 0):
		add(CheckFailedClaimed, "failed (never offered) with %d packets, %d cents claimed",
			r.Packets.ClaimedN, r.ClaimedCents)
	}
}
