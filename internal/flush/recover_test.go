package flush

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap/zaptest"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/testenv/stack"
)

// suspendedByLoss returns an envelope of 10 packets with 4 claims in
// PostgreSQL that was suspended because Redis lost its data, and the claims.
func suspendedByLoss(t *testing.T, s *stack.Stack, f *Flusher) (int64, map[string]grab.Claim) {
	t.Helper()
	ctx := context.Background()
	e, claims := expiring(t, s, 10, 4)
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
	if got := status(t, s, e.ID); got != "suspended" {
		t.Fatalf("envelope is %s, want suspended", got)
	}
	return e.ID, claims
}

func TestRecoverReload(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	f := upkeepFlusher(t, s)
	id, claims := suspendedByLoss(t, s, f)

	plan, err := f.PlanRecovery(ctx, id, ActionReload)
	// Redis holds only the suspended meta left when the envelope was suspended.
	if err != nil || plan.Blocked != "" || plan.Claimed != 4 || plan.Unclaimed != 6 ||
		plan.Redis.Status != "suspended" || plan.Redis.Claims != 0 || plan.Redis.Remaining != 0 {
		t.Fatalf("plan = %+v, %v", plan, err)
	}
	var out bytes.Buffer
	if err := plan.WriteText(&out); err != nil || !strings.Contains(out.String(), "6 unclaimed packets") {
		t.Fatalf("plan text:\n%s", out.String())
	}
	if got := status(t, s, id); got != "suspended" {
		t.Fatalf("planning changed the envelope to %s", got)
	}
	if st, err := f.Recover(ctx, plan); err != nil || st != "open" {
		t.Fatalf("Recover = %q, %v", st, err)
	}
	// Holders get their own packet again; newcomers share the six left, and
	// nobody gets a second one.
	for u, want := range claims {
		got, err := s.Svc.Grab(ctx, id, u)
		if err != nil || !got.Repeat || got.PacketID != want.PacketID {
			t.Errorf("holder %s after reload: %+v, %v; want packet %d again", u, got, err, want.PacketID)
		}
	}
	for i := range 8 {
		u := fmt.Sprintf("n%d", i)
		c, err := s.Svc.Grab(ctx, id, u)
		switch {
		case i < 6 && err == nil:
			claims[u] = c
		case i >= 6 && errors.Is(err, grab.ErrSoldOut):
		default:
			t.Fatalf("grab %d after reload: %+v, %v", i, c, err)
		}
	}
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	s.AssertDurable(t, id, claims)
	if got := status(t, s, id); got != "sold_out" {
		t.Fatalf("status %s after every packet was grabbed", got)
	}
}

func TestRecoverRefund(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	f := upkeepFlusher(t, s)
	id, claims := suspendedByLoss(t, s, f)
	plan, err := f.PlanRecovery(ctx, id, ActionRefund)
	if err != nil || plan.Blocked != "" {
		t.Fatalf("plan = %+v, %v", plan, err)
	}
	if st, err := f.Recover(ctx, plan); err != nil || st != "settled" {
		t.Fatalf("Recover = %q, %v", st, err)
	}
	wantSettled(t, s, id, claims)
	assertAnswersAfterSettlement(t, s, id, claims)
	// Settled is final: a second recovery is refused.
	if plan, err := f.PlanRecovery(ctx, id, ActionRefund); err != nil || plan.Blocked == "" {
		t.Fatalf("second plan = %+v, %v; want blocked", plan, err)
	}
	// The creator's load, late, finds what the refund left and loads
	// nothing: refunded packets are never offered again.
	e, _ := s.PG.Envelope(ctx, id)
	if loaded, err := s.Redis.LoadEnvelope(ctx, id, e.ExpiresAt, e.TotalCents,
		[]redisstore.Packet{{ID: 1, AmountCents: e.TotalCents}}); !errors.Is(err, redisstore.ErrGivenUp) || loaded {
		t.Fatalf("late load after the refund = %v, %v; want ErrGivenUp", loaded, err)
	}
	assertAnswersAfterSettlement(t, s, id, claims)
}

// Two recoveries of one envelope at once, a refund and a reload: one is
// carried out, the other finds the envelope changed and does nothing, and
// PostgreSQL and Redis agree on the outcome.
func TestRecoveriesOfOneEnvelopeDoNotInterleave(t *testing.T) {
	t.Parallel()
	for round := range 5 {
		s := stack.New(t)
		ctx := context.Background()
		f := upkeepFlusher(t, s)
		id, claims := suspendedByLoss(t, s, f)
		type outcome struct {
			st  envelope.Status
			err error
		}
		results := make(chan outcome, 2)
		for _, action := range []Action{ActionRefund, ActionReload} {
			plan, err := f.PlanRecovery(ctx, id, action)
			if err != nil || plan.Blocked != "" {
				t.Fatalf("plan %s = %+v, %v", action, plan, err)
			}
			go func() {
				st, err := f.Recover(ctx, plan)
				results <- outcome{st, err}
			}()
		}
		done, blocked := 0, 0
		for range 2 {
			switch o := <-results; {
			case o.err == nil:
				done++
			case errors.Is(o.err, ErrBlocked):
				blocked++
			default:
				t.Fatalf("round %d: recovery failed: %v", round, o.err)
			}
		}
		if done != 1 || blocked != 1 {
			t.Fatalf("round %d: %d recoveries done, %d blocked; want one of each", round, done, blocked)
		}
		_, err := s.Svc.Grab(ctx, id, "newcomer")
		switch st := status(t, s, id); st {
		case envelope.StatusSettled:
			wantSettled(t, s, id, claims)
			if !errors.Is(err, grab.ErrExpired) && !errors.Is(err, grab.ErrSoldOut) {
				t.Errorf("round %d: grab of the refunded envelope = %v, want refused", round, err)
			}
		case envelope.StatusOpen:
			if err != nil {
				t.Errorf("round %d: grab of the reloaded envelope = %v", round, err)
			}
		default:
			t.Errorf("round %d: envelope is %s after the recoveries", round, st)
		}
	}
}

func TestRecoverBlocked(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	f := upkeepFlusher(t, s)
	open, _ := expiring(t, s, 5, 1)
	if plan, _ := f.PlanRecovery(ctx, open.ID, ActionRefund); !strings.Contains(plan.Blocked, "open") {
		t.Errorf("recovering an open envelope: blocked %q", plan.Blocked)
	}
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	id, _ := suspendedByLoss(t, s, f)
	// A claim of the envelope still queued (written back by hand here).
	raw := fmt.Sprintf("%d:1:1:%d:1:queued", id, time.Now().UnixMilli())
	shard := s.Redis.Keys().Shard(id)
	if err := s.RDB.LPush(ctx, s.Redis.Keys().Consumed(shard), raw).Err(); err != nil {
		t.Fatal(err)
	}
	plan, err := f.PlanRecovery(ctx, id, ActionRefund)
	if err != nil || plan.Queued != 1 || !strings.Contains(plan.Blocked, "wait in Redis") {
		t.Fatalf("plan with a queued claim = %+v, %v", plan, err)
	}
	if _, err := f.Recover(ctx, plan); !errors.Is(err, ErrBlocked) {
		t.Fatalf("Recover = %v, want ErrBlocked", err)
	}
	if err := s.RDB.Del(ctx, s.Redis.Keys().Consumed(shard)).Err(); err != nil {
		t.Fatal(err)
	}
	s.Clock.Advance(2 * time.Minute)
	if plan, _ := f.PlanRecovery(ctx, id, ActionReload); !strings.Contains(plan.Blocked, "refund it instead") {
		t.Errorf("reloading an expired envelope: blocked %q", plan.Blocked)
	}
	if _, err := f.PlanRecovery(ctx, id, "delete"); err == nil {
		t.Error("an unknown action was accepted")
	}
	if got := status(t, s, id); got != "suspended" {
		t.Errorf("blocked recoveries changed the envelope to %s", got)
	}
}

// A sold-out envelope suspended because its cents disagree with its packets
// cannot be settled by either action until the ledger is repaired: the plan
// says so, and recovery changes nothing.
func TestRecoverRefusesABadLedger(t *testing.T) {
	t.Parallel()
	for name, tamper := range map[string]string{
		"cents off":            `UPDATE envelopes SET claimed_cents = claimed_cents - 1, total_cents = total_cents - 1 WHERE id = $1`,
		"claimed and refunded": `UPDATE packet_pool SET refunded_at = now() WHERE id = (SELECT min(packet_id) FROM claims WHERE envelope_id = $1)`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := stack.New(t)
			ctx := context.Background()
			f := upkeepFlusher(t, s)
			e, _ := expiring(t, s, 3, 3)
			if err := f.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Pool.Exec(ctx, tamper, e.ID); err != nil {
				t.Fatal(err)
			}
			if err := f.Upkeep(ctx, false); err != nil {
				t.Fatal(err)
			}
			if st := status(t, s, e.ID); st != envelope.StatusSuspended {
				t.Fatalf("envelope is %s after its settlement, want suspended", st)
			}
			for _, action := range []Action{ActionRefund, ActionReload} {
				plan, err := f.PlanRecovery(ctx, e.ID, action)
				if err != nil || !strings.Contains(plan.Blocked, "disagree") {
					t.Errorf("%s plan of a bad ledger: blocked %q, %v", action, plan.Blocked, err)
				}
			}
		})
	}
}

// A refund that stopped after dropping the Redis state (PostgreSQL still
// suspended) may be finished by a reload instead; and recovery works with a
// pool of one connection (its lock is held outside the pool).
func TestReloadAfterAHalfDoneRefundOnAPoolOfOne(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := upkeepFlusher(t, s)
	id, claims := suspendedByLoss(t, s, f)
	e, _ := s.PG.Envelope(ctx, id)
	if err := s.Redis.Forget(ctx, id, e.Count, time.Hour); err != nil { // the refund's first step
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(s.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	one, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	small := New(s.Redis, pgstore.New(one), Config{KeyTTL: time.Hour}, zaptest.NewLogger(t))
	small.now = s.Clock.Now
	plan, err := small.PlanRecovery(ctx, id, ActionReload)
	if err != nil || plan.Blocked != "" {
		t.Fatalf("plan = %+v, %v", plan, err)
	}
	if st, err := small.Recover(ctx, plan); err != nil || st != envelope.StatusOpen {
		t.Fatalf("reload after a half-done refund = %q, %v", st, err)
	}
	for u, want := range claims {
		if got, err := s.Svc.Grab(ctx, id, u); err != nil || !got.Repeat || got.PacketID != want.PacketID {
			t.Errorf("holder %s after the reload: %+v, %v", u, got, err)
		}
	}
	// The refund's forgotten meta had the hour's lifetime: the open
	// envelope's keeps it until it is settled.
	if ttl := s.RDB.PTTL(ctx, s.Redis.Keys().Meta(id)).Val(); ttl != -1 {
		t.Errorf("the reloaded envelope's meta expires in %v; want it kept", ttl)
	}
}

// A suspension that PostgreSQL does not follow because the envelope is
// settled (a batch written again after its envelope was settled) does not
// leave Redis answering its grabs 503 for good.
func TestSuspendingASettledEnvelopeLeavesItAnswered(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	f := upkeepFlusher(t, s)
	e, claims := expiring(t, s, 3, 1)
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	s.Clock.Advance(2 * time.Minute)
	for range 2 {
		if err := f.Upkeep(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	if st := status(t, s, e.ID); st != envelope.StatusSettled {
		t.Fatalf("envelope is %s, want settled", st)
	}
	if err := f.suspend(ctx, e.ID, "a late conflict"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Svc.Grab(ctx, e.ID, "newcomer"); !errors.Is(err, grab.ErrExpired) {
		t.Errorf("grab of the settled envelope after a late suspension = %v, want ErrExpired", err)
	}
	assertAnswersAfterSettlement(t, s, e.ID, claims)
}

// A reload whose reopening PostgreSQL refuses (a DBA's lock outlasting the
// session's lock_timeout) has opened the envelope in Redis: its grants are
// stopped again, so the two agree it is suspended, and the error says to
// run the recovery again, which then reopens it.
func TestReloadNotReopenedStopsItsGrantsAgain(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	f := upkeepFlusher(t, s)
	id, _ := suspendedByLoss(t, s, f)
	plan, err := f.PlanRecovery(ctx, id, ActionReload)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := pgstore.PoolConfig(s.DBURL, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	impatient := New(s.Redis, pgstore.New(pool), Config{KeyTTL: time.Hour}, zaptest.NewLogger(t))
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM envelopes WHERE id = $1 FOR UPDATE", id); err != nil {
		t.Fatal(err)
	}
	_, err = impatient.Recover(ctx, plan)
	_ = tx.Rollback(ctx)
	if err == nil || !strings.Contains(err.Error(), "stays suspended: run the recovery again") {
		t.Fatalf("a reload not reopened = %v, want the grants stopped again and the recovery to be run again", err)
	}
	if _, err := s.Svc.Grab(ctx, id, "between"); !errors.Is(err, grab.ErrUnavailable) {
		t.Fatalf("grab after the failed reopening = %v, want ErrUnavailable (suspended)", err)
	}
	if got := status(t, s, id); got != "suspended" {
		t.Fatalf("envelope is %s, want suspended", got)
	}
	plan, err = f.PlanRecovery(ctx, id, ActionReload)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := f.Recover(ctx, plan); err != nil || st != "open" {
		t.Fatalf("the recovery run again = %q, %v; want open", st, err)
	}
}
