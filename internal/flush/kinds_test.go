package flush

import (
	"context"
	"errors"
	"testing"
	"time"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/pgstore"
	"redpacket/internal/testenv/stack"
)

// A user who comes after the last packet is told sold_out, never expired:
// while the envelope is open, once the flusher settled it, after its expiry
// and once Redis forgot it.
func TestSoldOutStaysSoldOut(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	e, claims := expiring(t, s, 5, 5)
	late := func(when string) {
		t.Helper()
		if _, err := s.Svc.Grab(ctx, e.ID, "late"); !errors.Is(err, grab.ErrSoldOut) {
			t.Errorf("a late grab %s = %v, want sold out", when, err)
		}
	}
	late("before the flusher")
	f := upkeepFlusher(t, s)
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Upkeep(ctx, false); err != nil {
		t.Fatal(err)
	}
	wantSettled(t, s, e.ID, claims)
	late("after settlement")
	s.Clock.Advance(2 * time.Minute)
	late("after the expiry")
	if err := s.Redis.Forget(ctx, e.ID, int(e.Count), time.Hour); err != nil {
		t.Fatal(err)
	}
	late("from PostgreSQL")
	for u, want := range claims {
		if got, err := s.Svc.Grab(ctx, e.ID, u); err != nil || !got.Repeat || got.PacketID != want.PacketID {
			t.Errorf("holder %s: %+v, %v", u, got, err)
		}
	}
}

// A sender's close stops grants at once, answers the same when repeated,
// and the flusher settles the envelope like an expired one, without waiting
// for its expiry.
func TestCloseSettlesLikeAnExpiredEnvelope(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	e, claims := expiring(t, s, 10, 3)
	st, err := s.Svc.Close(ctx, e.ID)
	if err != nil || st.Status != envelope.StatusExpired || st.ClosedAt == nil || st.GrabbedCount != 3 {
		t.Fatalf("Close = %+v, %v; want expired, closed, 3 grabbed", st, err)
	}
	if _, err := s.Svc.Grab(ctx, e.ID, "newcomer"); !errors.Is(err, grab.ErrExpired) {
		t.Fatalf("a grab after the close = %v, want expired", err)
	}
	for u, want := range claims {
		if got, err := s.Svc.Grab(ctx, e.ID, u); err != nil || !got.Repeat || got.PacketID != want.PacketID {
			t.Errorf("holder %s after the close: %+v, %v", u, got, err)
		}
	}
	s.Clock.Advance(time.Second)
	again, err := s.Svc.Close(ctx, e.ID)
	if err != nil || again.ClosedAt == nil || !again.ClosedAt.Equal(*st.ClosedAt) || !again.ExpiresAt.Equal(st.ExpiresAt) {
		t.Fatalf("closing again = %+v, %v; want the first close kept", again, err)
	}
	f := upkeepFlusher(t, s)
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Upkeep(ctx, false); err != nil {
		t.Fatal(err)
	}
	wantSettled(t, s, e.ID, claims)
	if st, err := s.Svc.Close(ctx, e.ID); err != nil || st.Status != envelope.StatusSettled {
		t.Fatalf("closing a settled envelope = %+v, %v; want its status", st, err)
	}
	if _, err := s.Svc.Close(ctx, 999999); !errors.Is(err, grab.ErrNotFound) {
		t.Fatalf("closing an unknown envelope = %v, want not found", err)
	}
}

// An operator's reload and the repair of a loading envelope put the gates
// back: recipients, password and start hold as they did.
func TestReloadAndRepairKeepTheGates(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	pw := "open sesame"
	secs := int64(60)
	e, err := s.Svc.Create(ctx, envelope.CreateRequest{SenderID: "s", TotalCents: 300, Count: 3,
		ExpiresInSeconds: &secs, Recipients: []string{"a", "b", "c"}, Password: &pw})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Svc.GrabWithPassword(ctx, e.ID, "a", pw)
	if err != nil {
		t.Fatal(err)
	}
	f := upkeepFlusher(t, s)
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Upkeep(ctx, false); err != nil {
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
	if st, err := f.Recover(ctx, plan); err != nil || st != "open" {
		t.Fatalf("Recover = %q, %v", st, err)
	}
	wantGates(t, s, e.ID, pw, map[string]grab.Claim{"a": first})

	// A loading envelope the flusher loads carries its gates too.
	now := s.Clock.Now()
	start := now.Add(30 * time.Second)
	digest := envelope.PasswordDigest(77, pw)
	row := pgstore.Envelope{ID: 77, Shard: s.Redis.Keys().Shard(77), SenderID: "s", TotalCents: 30, Count: 3,
		CreatedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour), StartsAt: &start, PasswordDigest: &digest}
	if err := s.PG.InsertEnvelopeFor(ctx, row, pgstore.NewEnvelope{FirstPacketID: 7700, Amounts: []int64{10, 10, 10},
		Recipients: []string{"a", "b", "c"}}); err != nil {
		t.Fatal(err)
	}
	repair := newFlusher(t, s, Config{RepairAfter: 30 * time.Second, KeyTTL: time.Hour})
	repair.now = s.Clock.Now
	if err := repair.Upkeep(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Svc.GrabWithPassword(ctx, 77, "a", pw); !errors.Is(err, grab.ErrNotStarted) {
		t.Fatalf("grab before the start of a repaired envelope = %v, want not started", err)
	}
	s.Clock.Advance(30 * time.Second)
	wantGates(t, s, 77, pw, nil)
}

// wantGates checks that a non-recipient and a wrong password are refused,
// taking nothing, that holders repeat without a password, and that a
// recipient with the password is granted.
func wantGates(t *testing.T, s *stack.Stack, id int64, pw string, held map[string]grab.Claim) {
	t.Helper()
	ctx := context.Background()
	before, err := s.Svc.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Svc.GrabWithPassword(ctx, id, "x", pw); !errors.Is(err, grab.ErrNotRecipient) {
		t.Errorf("envelope %d: a non-recipient's grab = %v, want not recipient", id, err)
	}
	if _, err := s.Svc.GrabWithPassword(ctx, id, "b", pw+"!"); !errors.Is(err, grab.ErrWrongPassword) {
		t.Errorf("envelope %d: a wrong password = %v, want wrong password", id, err)
	}
	if _, err := s.Svc.Grab(ctx, id, "b"); !errors.Is(err, grab.ErrWrongPassword) {
		t.Errorf("envelope %d: no password = %v, want wrong password", id, err)
	}
	after, err := s.Svc.Status(ctx, id)
	if err != nil || after.GrabbedCount != before.GrabbedCount || after.GrabbedCents != before.GrabbedCents {
		t.Errorf("envelope %d: refused grabs took something: %+v then %+v, %v", id, before, after, err)
	}
	for u, want := range held {
		if got, err := s.Svc.Grab(ctx, id, u); err != nil || !got.Repeat || got.PacketID != want.PacketID {
			t.Errorf("envelope %d: holder %s = %+v, %v; want a repeat", id, u, got, err)
		}
	}
	if _, err := s.Svc.GrabWithPassword(ctx, id, "b", pw); err != nil {
		t.Errorf("envelope %d: a recipient with the password: %v", id, err)
	}
}
