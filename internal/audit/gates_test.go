package audit

import (
	"slices"
	"testing"

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
