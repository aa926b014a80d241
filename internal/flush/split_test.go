package flush

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/testenv/stack"
)

// The packets go out in the committed order also when Redis loses the
// envelope and an operator reloads it from PostgreSQL.
func TestSplitHoldsAcrossRedisLossAndReload(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	f := upkeepFlusher(t, s)
	e, first := expiring(t, s, 10, 4)
	granted := slices.Collect(maps.Values(first))
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Upkeep(ctx, false); err != nil {
		t.Fatal(err)
	}
	// A grant Redis loses before it is flushed: its packet is offered again.
	if _, err := s.Svc.Grab(ctx, e.ID, "lost"); err != nil {
		t.Fatal(err)
	}
	loseRedis(t, s)
	if err := f.Upkeep(ctx, false); err != nil {
		t.Fatal(err)
	}
	plan, err := f.PlanRecovery(ctx, e.ID, ActionReload)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := f.Recover(ctx, plan); err != nil || st != envelope.StatusOpen {
		t.Fatalf("Recover = %q, %v", st, err)
	}
	for i := range 6 {
		c, err := s.Svc.Grab(ctx, e.ID, fmt.Sprintf("after-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		granted = append(granted, c)
	}
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Upkeep(ctx, false); err != nil { // settles it: sold out
		t.Fatal(err)
	}
	wantSplitInGrantOrder(t, s, e, granted)
}

// wantSplitInGrantOrder checks that settled envelope e's split checks out
// against its commitment, and that both its claims list and granted, in the
// order of their order numbers, follow the committed packet order.
func wantSplitInGrantOrder(t *testing.T, s *stack.Stack, e grab.Envelope, granted []grab.Claim) {
	t.Helper()
	ctx := context.Background()
	sp, err := s.Svc.Split(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sp.Commitment != e.SplitCommitment || envelope.Commitment(sp.Salt, sp.PacketIDs, sp.Amounts) != e.SplitCommitment {
		t.Fatalf("split %+v does not check out against the commitment %s", sp, e.SplitCommitment)
	}
	page, err := s.Svc.Claims(ctx, e.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var listed []int64
	for _, c := range page.Claims {
		listed = append(listed, c.PacketID)
	}
	// The order numbers count the grants in the order they were made.
	slices.SortFunc(granted, func(a, b grab.Claim) int { return strings.Compare(a.OrderNo, b.OrderNo) })
	var handedOut []int64
	for _, c := range granted {
		handedOut = append(handedOut, c.PacketID)
	}
	if !slices.Equal(listed, sp.PacketIDs) || !slices.Equal(handedOut, sp.PacketIDs) {
		t.Fatalf("claims after a reload %v, handed out %v, committed order %v", listed, handedOut, sp.PacketIDs)
	}
}
