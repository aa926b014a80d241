package flush

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap/zaptest"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/pgstore"
	"redpacket/internal/testenv/stack"
)

var errCrash = errors.New("simulated crash")

func newFlusher(t *testing.T, s *stack.Stack, cfg Config) *Flusher {
	return New(s.Redis, s.PG, cfg, zaptest.NewLogger(t))
}

// drainWithin drains every shard with a new flusher, failing the test if
// that takes longer than within: a shard stuck on an entry it cannot write.
func drainWithin(t *testing.T, s *stack.Stack, within time.Duration, what string) {
	t.Helper()
	drained := make(chan error, 1)
	go func() { drained <- newFlusher(t, s, Config{}).Drain(context.Background()) }()
	select {
	case err := <-drained:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(within):
		t.Fatalf("a shard is stuck on %s", what)
	}
}

func TestCrashBetweenTakeAndCommit(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	e, claims := s.Grabbed(t, 50, 40)
	ctx := context.Background()
	crashed := newFlusher(t, s, Config{BatchSize: 15})
	crashed.afterTake = func(int) error { return errCrash }
	shard := s.Redis.Keys().Shard(e.ID)
	if _, err := crashed.FlushShard(ctx, shard); !errors.Is(err, errCrash) {
		t.Fatalf("FlushShard = %v, want the crash", err)
	}
	if inPG := s.ClaimedInPG(t); inPG != 0 {
		t.Fatalf("%d claims committed before the crash point", inPG)
	}
	if err := newFlusher(t, s, Config{BatchSize: 15}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	s.AssertDurable(t, e.ID, claims)
}

func TestCrashBetweenCommitAndAck(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	e, claims := s.Grabbed(t, 50, 40)
	ctx := context.Background()
	crashed := newFlusher(t, s, Config{BatchSize: 15, Pipeline: 2})
	crashed.afterCommit = func(int) error { return errCrash }
	shard := s.Redis.Keys().Shard(e.ID)
	if _, err := crashed.FlushShard(ctx, shard); !errors.Is(err, errCrash) {
		t.Fatalf("FlushShard = %v, want the crash", err)
	}
	// The batch is two transactions of 15: both committed, it stays in
	// flight whole until the ack.
	inflight, _ := s.RDB.LLen(ctx, s.Redis.Keys().Inflight(shard)).Result()
	if inflight != 30 {
		t.Fatalf("in flight after the crash: %d, want the batch of 30", inflight)
	}
	// The next flusher re-applies the committed batch first: a no-op.
	if err := newFlusher(t, s, Config{BatchSize: 15}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	s.AssertDurable(t, e.ID, claims)
}

// A flusher killed between the transactions of one batch (the first
// committed, the second not): the whole batch is still in flight, and the
// next flusher writes the rest of it once, the committed part changing
// nothing.
func TestCrashBetweenTheTransactionsOfABatch(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	e, claims := s.Grabbed(t, 50, 40)
	ctx := context.Background()
	crashed := newFlusher(t, s, Config{BatchSize: 15, Pipeline: 2})
	crashed.afterTake = func(int) error { return errCrash }
	shard := s.Redis.Keys().Shard(e.ID)
	if _, err := crashed.FlushShard(ctx, shard); !errors.Is(err, errCrash) {
		t.Fatalf("FlushShard = %v, want the crash", err)
	}
	// What the crashed flusher's first transaction committed.
	inflight, err := s.Redis.TakeBatch(ctx, shard, 30)
	if err != nil || inflight.Len() != 30 {
		t.Fatalf("in flight: %d, %v; want the batch of 30", inflight.Len(), err)
	}
	if _, err := s.PG.ApplyClaims(ctx, toClaims(inflight.Claims[:15])); err != nil {
		t.Fatal(err)
	}
	if err := newFlusher(t, s, Config{BatchSize: 15, Pipeline: 2}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	s.AssertDurable(t, e.ID, claims)
}

func TestPostgresDownLosesNothing(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	e, claims := s.Grabbed(t, 20, 20)
	ctx := context.Background()
	// Port 1 on loopback refuses connections: PostgreSQL is "down".
	down, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	broken := New(s.Redis, pgstore.New(down), Config{BatchSize: 5, MaxBackoff: 20 * time.Millisecond}, zaptest.NewLogger(t))
	runCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := broken.Run(runCtx); err != nil {
		t.Fatalf("Run = %v; a failing database must be retried, not fatal", err)
	}
	if _, err := broken.Pass(ctx); err == nil {
		t.Fatal("Pass succeeded against a database that is down")
	}
	// Back up: everything answered is still there to flush.
	if err := newFlusher(t, s, Config{BatchSize: 5}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	s.AssertDurable(t, e.ID, claims)
}

func TestConflictIsRecordedNotOverwritten(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	e, claims := s.Grabbed(t, 10, 3)
	ctx := context.Background()
	victim := claims["u1"]
	// Someone else already holds u1's packet in PostgreSQL (as after a Redis
	// loss that re-offered it).
	if _, err := s.Pool.Exec(ctx, `UPDATE packets SET claimed_by = 'intruder', claimed_at = now()
		WHERE id = $1`, victim.PacketID); err != nil {
		t.Fatal(err)
	}
	if err := newFlusher(t, s, Config{}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	var holder, reason string
	if err := s.Pool.QueryRow(ctx, `SELECT p.claimed_by, c.reason FROM packets p
		JOIN claim_conflicts c ON c.packet_id = p.id AND c.user_id = 'u1' WHERE p.id = $1`,
		victim.PacketID).Scan(&holder, &reason); err != nil {
		t.Fatalf("conflict not recorded: %v", err)
	}
	if holder != "intruder" || reason != "claimed_by_another_user" {
		t.Fatalf("packet held by %q, conflict reason %q", holder, reason)
	}
	var others int
	_ = s.Pool.QueryRow(ctx, `SELECT count(*) FROM packets WHERE envelope_id = $1
		AND claimed_by IN ('u0', 'u2')`, e.ID).Scan(&others)
	if others != 2 {
		t.Fatalf("the other claims of the batch: %d applied, want 2", others)
	}
}

// A malformed queue entry is set aside in the shard's rejected list, once,
// though its batch is written twice (the first flusher stopped after the
// commit, before the ack); the batch's claims are written all the same.
func TestMalformedClaimIsSetAside(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	e, claims := s.Grabbed(t, 10, 4)
	ctx := context.Background()
	shard := s.Redis.Keys().Shard(e.ID)
	s.RDB.LPush(ctx, s.Redis.Keys().Consumed(shard), "garbage")
	crashed := newFlusher(t, s, Config{})
	crashed.afterCommit = func(int) error { return errCrash }
	if _, err := crashed.FlushShard(ctx, shard); !errors.Is(err, errCrash) {
		t.Fatalf("FlushShard = %v, want the crash", err)
	}
	if n, _ := s.RDB.LLen(ctx, s.Redis.Keys().Rejected(shard)).Result(); n != 0 {
		t.Fatalf("%d entries rejected before the batch was acknowledged", n)
	}
	if err := newFlusher(t, s, Config{}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	s.AssertDurable(t, e.ID, claims)
	rejected, _ := s.RDB.LRange(ctx, s.Redis.Keys().Rejected(shard), 0, -1).Result()
	if len(rejected) != 1 || rejected[0] != "garbage" {
		t.Fatalf("rejected list = %q, want the malformed entry once", rejected)
	}
}

func TestRepairLoadingEnvelope(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	now := s.Clock.Now()
	// Two envelopes whose grabber died after the commit: one long ago, one
	// just now (its grabber may still be finishing).
	for i, created := range []time.Time{now.Add(-time.Minute), now} {
		id := int64(1 + i)
		row := pgstore.Envelope{ID: id, Shard: s.Redis.Keys().Shard(id), SenderID: "s", TotalCents: 30, Count: 3,
			CreatedAt: created, ExpiresAt: created.Add(time.Hour)}
		if err := s.PG.InsertEnvelope(ctx, row, 100*id, []int64{10, 10, 10}); err != nil {
			t.Fatal(err)
		}
	}
	f := newFlusher(t, s, Config{RepairAfter: 30 * time.Second})
	f.now = s.Clock.Now
	for range 2 { // a second round must change nothing
		if err := f.Upkeep(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	old, fresh := s.Envelope(t, 1), s.Envelope(t, 2)
	if old.Status != envelope.StatusOpen || fresh.Status != envelope.StatusLoading {
		t.Fatalf("statuses after repair: old %s, fresh %s", old.Status, fresh.Status)
	}
	if n := s.Len(t, s.Redis.Keys().Pool(1)); n != 3 {
		t.Fatalf("repaired pool holds %d packets, want 3 (loaded once)", n)
	}
	if _, err := s.Svc.Grab(ctx, 1, "u"); err != nil {
		t.Fatalf("grab from the repaired envelope: %v", err)
	}
	if _, err := s.Svc.Grab(ctx, 2, "u"); !errors.Is(err, grab.ErrUnavailable) {
		t.Fatalf("grab from an envelope still loading: %v, want unavailable", err)
	}
}

func TestRunFlushesAndStopsOnCancel(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	e, claims := s.Grabbed(t, 30, 25)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- newFlusher(t, s, Config{BatchSize: 10, IdleWait: 10 * time.Millisecond}).Run(ctx) }()
	waitClaimed(t, s, len(claims), 10*time.Second)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	s.AssertDurable(t, e.ID, claims)
}

// Several claims PostgreSQL refuses, spread through a batch of good ones:
// the batch is halved until each is alone; every good claim is written and
// every refused one set aside, none twice.
func TestRefusedClaimsAmongManyAreSetAside(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	e, claims := s.Grabbed(t, 60, 45)
	ctx := context.Background()
	keys := s.Redis.Keys()
	var bad []string
	for i := range 3 {
		bad = append(bad, fmt.Sprintf("%d:%d:1:%d:1:time-traveller-%d", e.ID, 1+i, int64(9.3e15), i))
	}
	// Between the queued grabs: one at the head, one in the middle, one at the tail.
	consumed := keys.Consumed(keys.Shard(e.ID))
	if err := s.RDB.LPush(ctx, consumed, bad[0]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.RDB.RPush(ctx, consumed, bad[1]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.RDB.LInsertBefore(ctx, consumed, s.RDB.LIndex(ctx, consumed, 20).Val(), bad[2]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := newFlusher(t, s, Config{}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	s.AssertDurable(t, e.ID, claims)
	rejected, _ := s.RDB.LRange(ctx, keys.Rejected(keys.Shard(e.ID)), 0, -1).Result()
	slices.Sort(rejected)
	if !slices.Equal(rejected, bad) {
		t.Fatalf("rejected list = %q, want the three refused claims", rejected)
	}
}

func TestClaimPostgresRefusesIsSetAside(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	e, claims := s.Grabbed(t, 10, 4)
	ctx := context.Background()
	shard := s.Redis.Keys().Shard(e.ID)
	// Well formed, but no timestamp PostgreSQL can store.
	bad := fmt.Sprintf("%d:1:1:%d:1:time-traveller", e.ID, int64(9.3e15))
	s.RDB.LPush(ctx, s.Redis.Keys().Consumed(shard), bad)
	drainWithin(t, s, 20*time.Second, "a claim PostgreSQL refuses")
	s.AssertDurable(t, e.ID, claims)
	rejected, _ := s.RDB.LRange(ctx, s.Redis.Keys().Rejected(shard), 0, -1).Result()
	if len(rejected) != 1 || rejected[0] != bad {
		t.Fatalf("rejected list = %q, want the refused claim", rejected)
	}
	// Its user was answered a packet that cannot be paid: an operator decides.
	if e := s.Envelope(t, e.ID); e.Status != envelope.StatusSuspended {
		t.Fatalf("envelope is %s after a refused claim, want suspended", e.Status)
	}
}

// A batch in hand when the flusher is told to stop goes on, ended by the
// grace (graceful.Detached's test) or, without a stop, by batchTimeout.
func TestBatchContextLastsBatchTimeout(t *testing.T) {
	t.Parallel()
	ctx, cancel := batchContext(context.Background(), 300*time.Millisecond)
	defer cancel()
	if d, ok := ctx.Deadline(); !ok || time.Until(d) < batchTimeout-time.Second {
		t.Errorf("deadline %v (%v), want batchTimeout from now", d, ok)
	}
}

// A claim of an envelope PostgreSQL does not hold (Redis back from older
// data, the envelope since removed by retention) is recorded as a conflict
// and does not hold up its shard.
func TestClaimOfAMissingEnvelopeDoesNotStallItsShard(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	_, claims := s.Grabbed(t, 10, 4)
	ctx := context.Background()
	const missing = 987654
	shard := s.Redis.Keys().Shard(missing)
	raw := fmt.Sprintf("%d:1:1:%d:1:ghost", missing, time.Now().UnixMilli())
	if err := s.RDB.LPush(ctx, s.Redis.Keys().Consumed(shard), raw).Err(); err != nil {
		t.Fatal(err)
	}
	drainWithin(t, s, 20*time.Second, "a claim of a missing envelope")
	if inPG := s.ClaimedInPG(t); inPG != len(claims) {
		t.Errorf("%d claims in PostgreSQL, want the envelope's %d", inPG, len(claims))
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM claim_conflicts WHERE envelope_id = $1`, missing).Scan(&n); err != nil || n != 1 {
		t.Errorf("conflicts of the missing envelope: %d, %v; want 1", n, err)
	}
}
