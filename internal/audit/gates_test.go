package audit

import (
	"slices"
	"testing"
	"time"

	"redpacket/internal/envelope"
)

func TestCheckGates(t *testing.T) {
	t.Parallel()
	fixed := row(envelope.StatusOpen, 500)
	fixed.Kind, fixed.Packets.MinCents, fixed.Packets.MaxCents = envelope.KindFixed, 250, 250
	if got := checks(checkEnvelope(fixed)); len(got) != 0 {
		t.Fatalf("a sound fixed envelope breaks %v", got)
	}
	for _, c := range []struct {
		edit func(*envelopeRow)
		want string
	}{
		{func(r *envelopeRow) { r.Packets.MinCents = 249 }, CheckFixedAmounts},
		{func(r *envelopeRow) { r.Packets.MinCents, r.Packets.MaxCents = 200, 200 }, CheckFixedAmounts},
		{func(r *envelopeRow) { r.RecipientsCount = 3 }, CheckRecipientsCount},
		{func(r *envelopeRow) { r.Packets.NotRecipient = 1 }, CheckNotRecipient},
		{func(r *envelopeRow) { r.Packets.BeforeStart = 2 }, CheckBeforeStart},
	} {
		r := fixed
		c.edit(&r)
		if got := checks(checkEnvelope(r)); !slices.Equal(got, []string{c.want}) {
			t.Errorf("checks %v, want [%s]", got, c.want)
		}
	}
}

// The gates' checks read PostgreSQL as they should: a claim by someone not
// among the recipients, one before the start, a fixed envelope of unequal
// packets, and a recipients count that does not match its rows.
func TestGateViolationsAreFound(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	created := time.Now().Add(-time.Hour)
	for id := int64(1); id <= 4; id++ {
		d.insert(id, "open", created, 10, 10, 10)
	}
	d.setStatus(1, "sold_out")
	d.exec(`UPDATE envelopes SET recipients_count = 2 WHERE id IN (1, 4)`)
	d.exec(`INSERT INTO envelope_recipients VALUES (1, 'u0'), (1, 'u1'), (4, 'u0')`)
	d.claimFirst(1, 3) // u2 is no recipient
	d.exec(`UPDATE envelopes SET starts_at = now() + interval '1 hour' WHERE id = 2`)
	d.claimFirst(2, 1)
	d.exec(`UPDATE envelopes SET kind = 'fixed' WHERE id = 3`)
	d.exec(`UPDATE packets SET amount_cents = amount_cents + 1 WHERE id = $1`, packet(3, 0))
	d.exec(`UPDATE packets SET amount_cents = amount_cents - 1 WHERE id = $1`, packet(3, 1))
	assertViolations(t, d.runPG(Options{}), map[int64][]string{
		1: {CheckNotRecipient}, 2: {CheckBeforeStart}, 3: {CheckFixedAmounts}, 4: {CheckRecipientsCount},
	})
}
