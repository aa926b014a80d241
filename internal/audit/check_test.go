package audit

import (
	"slices"
	"testing"

	"redpacket/internal/envelope"
)

// row is a consistent envelope of 4 packets, 1000 cents, in the status given,
// with claimed of its cents claimed (the rest refunded when final).
func row(status envelope.Status, claimed int64) envelopeRow {
	r := envelopeRow{ID: 7, Status: status, Count: 4, TotalCents: 1000, ClaimedCents: claimed,
		Packets: packetTotals{N: 4, Cents: 1000, ClaimedCents: claimed}}
	if claimed > 0 {
		r.Packets.ClaimedN = 2
	}
	if claimed == 1000 {
		r.Packets.ClaimedN = 4
	}
	if final(status) {
		r.RefundedCents = 1000 - claimed
		r.Packets.RefundedCents = r.RefundedCents
		r.Packets.RefundedN = 4 - r.Packets.ClaimedN
		r.HasSettledAt = true
	}
	return r
}

func checks(vs []Violation) []string {
	out := []string{}
	for _, v := range vs {
		out = append(out, v.Check)
	}
	return out
}

func TestCheckEnvelopeConsistentRows(t *testing.T) {
	t.Parallel()
	for _, r := range []envelopeRow{
		row("loading", 0), row("loading", 1000), // flushed before marked loaded
		row("open", 0), row("open", 400),
		row("sold_out", 1000),
		row("expired", 400), row("expired", 1000), // last packet flushed after expiry
		row("suspended", 400), row("suspended", 1000),
		row("settled", 0), row("settled", 400), row("settled", 1000),
		row("failed", 0),
	} {
		if vs := checkEnvelope(r); len(vs) != 0 {
			t.Errorf("%s with %d claimed: %v", r.Status, r.ClaimedCents, vs)
		}
	}
}

// brokenInvariants are envelope rows, each with some invariants broken, and
// the checks that must find them.
var brokenInvariants = []struct {
	name   string
	row    func() envelopeRow
	checks []string
}{
	{"packet missing", func() envelopeRow {
		r := row("open", 0)
		r.Packets.N, r.Packets.Cents = 3, 900
		return r
	}, []string{CheckPacketCount, CheckPacketSum}},
	{"amount changed", func() envelopeRow {
		r := row("open", 0)
		r.Packets.Cents = 1001
		return r
	}, []string{CheckPacketSum}},
	{"claimed_cents off", func() envelopeRow {
		r := row("open", 400)
		r.ClaimedCents = 399
		return r
	}, []string{CheckClaimedCents}},
	{"refunded_cents off", func() envelopeRow {
		r := row("settled", 400)
		r.RefundedCents = 500
		return r
	}, []string{CheckRefundedCents, CheckClaimedPlusRefund}},
	{"packet claimed and refunded", func() envelopeRow {
		r := row("open", 400)
		r.Packets.ClaimedAndRefunded, r.Packets.RefundedN, r.Packets.RefundedCents = 1, 1, 100
		return r
	}, []string{CheckClaimedAndRefunded, CheckRefundedCents}},
	{"user twice", func() envelopeRow {
		r := row("open", 400)
		r.Packets.UsersTwice = 1
		return r
	}, []string{CheckUserTwice}},
	{"claimed plus refunded over total, open", func() envelopeRow {
		r := row("open", 400)
		r.RefundedCents, r.Packets.RefundedCents, r.Packets.RefundedN = 700, 700, 3
		return r
	}, []string{CheckClaimedPlusRefund}},
	{"settled short of total", func() envelopeRow {
		r := row("settled", 400)
		r.RefundedCents, r.Packets.RefundedCents = 500, 500
		return r
	}, []string{CheckClaimedPlusRefund}},
	{"settled with a packet left", func() envelopeRow {
		r := row("settled", 400)
		r.Packets.RefundedN = 1
		return r
	}, []string{CheckUnaccounted}},
	{"failed without settled_at", func() envelopeRow {
		r := row("failed", 0)
		r.HasSettledAt = false
		return r
	}, []string{CheckSettledAt}},
	{"open but everything claimed", func() envelopeRow { return row("open", 1000) },
		[]string{CheckSoldOutStatus}},
	{"sold_out with cents left", func() envelopeRow {
		r := row("sold_out", 1000)
		r.ClaimedCents, r.Packets.ClaimedCents, r.Packets.ClaimedN = 900, 900, 3
		return r
	}, []string{CheckSoldOutStatus}},
	{"failed with a claim", func() envelopeRow { return row("failed", 400) },
		[]string{CheckFailedClaimed}},
}

func TestCheckEnvelopeFindsEachBrokenInvariant(t *testing.T) {
	t.Parallel()
	for _, tc := range brokenInvariants {
		if got := checks(checkEnvelope(tc.row())); !slices.Equal(got, tc.checks) {
			t.Errorf("%s: checks %v, want %v", tc.name, got, tc.checks)
		}
	}
}

func TestCheckRedis(t *testing.T) {
	t.Parallel()
	open := row("open", 400)
	for _, tc := range []struct {
		name   string
		row    envelopeRow
		live   liveState
		checks []string
	}{
		{"in step", open, liveState{Loaded: true, Status: "open", GrabbedCents: "400", Pool: 2, Claims: 2}, nil},
		{"ahead of PostgreSQL", open, liveState{Loaded: true, Status: "open", GrabbedCents: "700", Pool: 1, Claims: 3}, nil},
		{"closed drops the pool", row("expired", 400), liveState{Loaded: true, Status: "closed", GrabbedCents: "400", Claims: 2}, nil},
		{"meta gone", open, liveState{Pool: 2, Claims: 2}, []string{CheckRedisMissing}},
		{"behind", open, liveState{Loaded: true, Status: "open", GrabbedCents: "300", Pool: 2, Claims: 2}, []string{CheckRedisBehind}},
		{"packet lost", open, liveState{Loaded: true, Status: "open", GrabbedCents: "400", Pool: 1, Claims: 2}, []string{CheckRedisPool}},
		{"packet twice", open, liveState{Loaded: true, Status: "open", GrabbedCents: "400", Pool: 3, Claims: 2}, []string{CheckRedisPool}},
		{"garbled", open, liveState{Loaded: true, Status: "open", GrabbedCents: "", Pool: 2, Claims: 2}, []string{CheckRedisMeta}},
		{"behind and lost", open, liveState{Loaded: true, Status: "open", GrabbedCents: "0", Pool: 3}, []string{CheckRedisBehind, CheckRedisPool}},
	} {
		got := checks(checkRedis(tc.row, tc.live))
		if tc.checks == nil {
			tc.checks = []string{}
		}
		if !slices.Equal(got, tc.checks) {
			t.Errorf("%s: checks %v, want %v", tc.name, got, tc.checks)
		}
	}
}

func TestParseLive(t *testing.T) {
	t.Parallel()
	l, err := parseLive([]any{"open", "250", int64(3), int64(1)})
	if err != nil || l != (liveState{Loaded: true, Status: "open", GrabbedCents: "250", Pool: 3, Claims: 1}) {
		t.Errorf("parseLive = %+v, %v", l, err)
	}
	l, err = parseLive([]any{nil, nil, int64(0), int64(0)})
	if err != nil || l.Loaded {
		t.Errorf("parseLive of no meta = %+v, %v", l, err)
	}
	if _, err := parseLive([]any{"open"}); err == nil {
		t.Error("parseLive accepted a short reply")
	}
}
