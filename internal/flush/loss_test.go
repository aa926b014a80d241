package flush

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
	"redpacket/internal/testenv/stack"
)

// loseRedis deletes every key of the stack's prefix, as a Redis restarted
// without persistence would.
func loseRedis(t *testing.T, s *stack.Stack) {
	t.Helper()
	testenv.DeleteKeys(context.Background(), s.RDB, "*"+s.Prefix+"*")
}

// insertLoading writes an envelope whose creator died before loading it.
func insertLoading(t *testing.T, s *stack.Stack, id int64, created time.Time) {
	t.Helper()
	row := pgstore.Envelope{ID: id, Shard: s.Redis.Keys().Shard(id), SenderID: "s", TotalCents: 30, Count: 3,
		CreatedAt: created, ExpiresAt: created.Add(time.Hour)}
	if err := s.PG.InsertEnvelope(context.Background(), row, 100*id, []int64{10, 10, 10}); err != nil {
		t.Fatal(err)
	}
}

func status(t *testing.T, s *stack.Stack, id int64) envelope.Status {
	t.Helper()
	e, err := s.PG.Envelope(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e.Status
}

func TestRedisLossSuspendsInsteadOfReoffering(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	f := upkeepFlusher(t, s)
	open, claims := expiring(t, s, 10, 4)
	sold, _ := expiring(t, s, 3, 3)
	insertLoading(t, s, 7, s.Clock.Now().Add(-time.Minute))
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Upkeep(ctx, false); err != nil { // records the epochs; settles the sold-out one
		t.Fatal(err)
	}
	// One more grab that Redis loses before it is flushed.
	if _, err := s.Svc.Grab(ctx, open.ID, "lost"); err != nil {
		t.Fatal(err)
	}
	loseRedis(t, s)
	if err := f.Upkeep(ctx, true); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]envelope.Status{open.ID: envelope.StatusSuspended, 7: envelope.StatusSuspended, sold.ID: envelope.StatusSettled} {
		if got := status(t, s, id); got != want {
			t.Errorf("envelope %d is %s after redis lost its data, want %s", id, got, want)
		}
	}
	if f.Suspended() != 2 {
		t.Errorf("Suspended() = %d, want 2", f.Suspended())
	}
	for _, id := range []int64{open.ID, 7} {
		if n, _ := s.RDB.LLen(ctx, s.Redis.Keys().Pool(id)).Result(); n != 0 {
			t.Errorf("envelope %d: %d packets offered again after the loss", id, n)
		}
		if _, err := s.Svc.Grab(ctx, id, "newcomer"); !errors.Is(err, grab.ErrUnavailable) {
			t.Errorf("grab of suspended envelope %d = %v, want ErrUnavailable", id, err)
		}
	}
	// Later rounds change nothing, and new envelopes work as before.
	if err := f.Upkeep(ctx, true); err != nil {
		t.Fatal(err)
	}
	if got := status(t, s, open.ID); got != "suspended" {
		t.Fatalf("envelope %d is %s on the next round", open.ID, got)
	}
	fresh, freshClaims := expiring(t, s, 5, 2)
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Upkeep(ctx, true); err != nil {
		t.Fatal(err)
	}
	if got := status(t, s, fresh.ID); got != "open" {
		t.Fatalf("an envelope created after the loss is %s", got)
	}
	s.AssertDurable(t, fresh.ID, freshClaims)
	_ = claims
}

// rewind puts an envelope's Redis state back to an earlier snapshot, as a
// Redis restarted from an AOF that misses its last writes would.
func rewind(t *testing.T, s *stack.Stack, id int64) func() {
	t.Helper()
	ctx := context.Background()
	k := s.Redis.Keys()
	keys := append([]string{k.Meta(id), k.Pool(id), k.Claims(id)}, k.ClaimBucketKeys(id, int(s.Envelope(t, id).Count))...)
	dumps := make([]string, len(keys))
	for i, k := range keys {
		dumps[i] = s.RDB.Dump(ctx, k).Val()
	}
	return func() {
		for i, k := range keys {
			err := s.RDB.Del(ctx, k).Err()
			if err == nil && dumps[i] != "" { // "": it did not exist then
				err = s.RDB.Restore(ctx, k, 0, dumps[i]).Err()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestRedisBehindPostgresSuspends(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	f := upkeepFlusher(t, s)
	e, _ := expiring(t, s, 10, 2)
	restore := rewind(t, s, e.ID)
	if _, err := s.Svc.Grab(ctx, e.ID, "early"); err != nil {
		t.Fatal(err)
	}
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	restore() // Redis forgets the grab PostgreSQL now holds
	// The packet "early" holds is in the pool again; whoever gets it now is
	// answered, but the batch shows the loss and the envelope is suspended.
	for _, u := range []string{"a", "b", "c"} {
		if _, err := s.Svc.Grab(ctx, e.ID, u); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := status(t, s, e.ID); got != "suspended" {
		t.Fatalf("envelope is %s after redis went back in time, want suspended", got)
	}
	if _, err := s.Svc.Grab(ctx, e.ID, "d"); !errors.Is(err, grab.ErrUnavailable) {
		t.Fatalf("grab after suspension = %v, want ErrUnavailable", err)
	}
	if l := readLedger(t, s, e.ID); l.claimed+l.refunded > l.total {
		t.Fatalf("ledger after the rewind: %+v", l)
	}
}

// A Redis back from an older copy of its data keeps its epoch tokens (they
// are in that copy), so only its new identity tells: the flusher then looks
// through its shards' envelopes and suspends one Redis holds behind
// PostgreSQL, without waiting for a grab of it to conflict. A flusher
// just started looks the same way (it knows no identity yet); a create under
// way (loading, no meta) is left alone.
func TestRedisBackFromOlderDataIsCheckedAndSuspends(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	e, _ := expiring(t, s, 10, 2)
	restore := rewind(t, s, e.ID)
	if _, err := s.Svc.Grab(ctx, e.ID, "early"); err != nil {
		t.Fatal(err)
	}
	if err := upkeepFlusher(t, s).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	restore() // Redis forgets the grab PostgreSQL now holds
	insertLoading(t, s, 9001, s.Clock.Now())
	if _, err := upkeepFlusher(t, s).Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := status(t, s, e.ID); got != envelope.StatusSuspended {
		t.Fatalf("envelope Redis holds behind PostgreSQL is %s, want suspended before any grant", got)
	}
	if _, err := s.Svc.Grab(ctx, e.ID, "late"); !errors.Is(err, grab.ErrUnavailable) {
		t.Fatalf("grab after the check = %v, want ErrUnavailable", err)
	}
	if got := status(t, s, 9001); got != envelope.StatusLoading {
		t.Errorf("envelope being created is %s, want loading", got)
	}
}

func TestRepairGivesUpOldLoadingEnvelope(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	now := s.Clock.Now()
	insertLoading(t, s, 1, now.Add(-11*time.Minute)) // never loaded: failed
	insertLoading(t, s, 2, now.Add(-11*time.Minute)) // loaded, creator died before marking it open
	insertLoading(t, s, 3, now.Add(-time.Minute))    // young enough: loaded now
	e2, _ := s.PG.Envelope(ctx, 2)
	if _, err := s.Redis.LoadEnvelope(ctx, 2, e2.ExpiresAt, 30,
		[]redisstore.Packet{{ID: 200, AmountCents: 10}, {ID: 201, AmountCents: 10}, {ID: 202, AmountCents: 10}}); err != nil {
		t.Fatal(err)
	}
	f := upkeepFlusher(t, s)
	for range 2 {
		if err := f.Upkeep(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[int64]envelope.Status{1: envelope.StatusFailed, 2: envelope.StatusOpen, 3: envelope.StatusOpen} {
		if got := status(t, s, id); got != want {
			t.Errorf("envelope %d is %s, want %s", id, got, want)
		}
	}
	if l := readLedger(t, s, 1); l.refunded != 30 || l.refundedPackets != 3 || l.claimedPackets != 0 {
		t.Errorf("failed envelope's ledger: %+v, want everything refunded", l)
	}
	// The creator of envelope 1 wakes up and loads it: nothing is offered.
	e1, _ := s.PG.Envelope(ctx, 1)
	loaded, err := s.Redis.LoadEnvelope(ctx, 1, e1.ExpiresAt, 30, []redisstore.Packet{{ID: 100, AmountCents: 10}})
	if !errors.Is(err, redisstore.ErrGivenUp) || loaded {
		t.Fatalf("late load of a failed envelope = %v, %v; want ErrGivenUp", loaded, err)
	}
	if _, err := s.Svc.Grab(ctx, 1, "u"); !errors.Is(err, grab.ErrExpired) {
		t.Fatalf("grab of a failed envelope = %v, want ErrExpired", err)
	}
}

// A suspended envelope stays closed to loads and grabs: a slow creator's late
// load is refused, and a recovery cut off between its Redis and PostgreSQL
// steps is suspended again before the next try acts.
func TestSuspendedStaysClosed(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	f := upkeepFlusher(t, s)
	id, claims := suspendedByLoss(t, s, f)
	e, _ := s.PG.Envelope(ctx, id)
	if _, err := s.Redis.LoadEnvelope(ctx, id, e.ExpiresAt, e.TotalCents,
		[]redisstore.Packet{{ID: 1, AmountCents: 1}}); !errors.Is(err, redisstore.ErrGivenUp) {
		t.Fatalf("late load of a suspended envelope = %v, want ErrGivenUp", err)
	}
	if _, err := s.Svc.Grab(ctx, id, "newcomer"); !errors.Is(err, grab.ErrUnavailable) {
		t.Fatalf("grab = %v, want ErrUnavailable", err)
	}
	// A reload whose PostgreSQL step never ran: Redis open, PostgreSQL suspended.
	plan, err := f.PlanRecovery(ctx, id, ActionReload)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.reload(ctx, plan.Envelope); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Svc.Grab(ctx, id, "slipped-in"); err != nil {
		t.Fatalf("grab while Redis was open again: %v", err)
	}
	if _, err := f.Recover(ctx, plan); !errors.Is(err, ErrBlocked) {
		t.Fatalf("recovery with a grab queued since the plan = %v, want ErrBlocked", err)
	}
	if _, err := s.Svc.Grab(ctx, id, "another"); !errors.Is(err, grab.ErrUnavailable) {
		t.Fatalf("grab after the refused recovery = %v, want ErrUnavailable (suspended again)", err)
	}
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	plan, _ = f.PlanRecovery(ctx, id, ActionRefund)
	if st, err := f.Recover(ctx, plan); err != nil || st != "settled" {
		t.Fatalf("refund = %q, %v", st, err)
	}
	if l := readLedger(t, s, id); l.claimedPackets != len(claims)+1 || l.claimed+l.refunded != l.total {
		t.Fatalf("ledger %+v: want the %d earlier claims and the one that slipped in, the rest refunded", l, len(claims))
	}
}

func TestGivingUpCanBeRepeated(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	f := upkeepFlusher(t, s)
	if err := f.Upkeep(ctx, false); err != nil { // epochs
		t.Fatal(err)
	}
	insertLoading(t, s, 1, s.Clock.Now().Add(-11*time.Minute))
	epochs, err := s.Redis.Epochs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The Redis step ran, then the flusher died before PostgreSQL's.
	if loaded, err := s.Redis.Fail(ctx, epochs[s.Redis.Keys().Shard(1)], 1, 3, time.Now(), 300, time.Hour); err != nil || loaded {
		t.Fatalf("Fail = %v, %v", loaded, err)
	}
	if err := f.Upkeep(ctx, true); err != nil {
		t.Fatal(err)
	}
	if got := status(t, s, 1); got != "failed" {
		t.Fatalf("envelope given up half-way is %s after the next round, want failed", got)
	}
	e, _ := s.PG.Envelope(ctx, 1)
	if _, err := s.Redis.LoadEnvelope(ctx, 1, e.ExpiresAt, 30, []redisstore.Packet{{ID: 100, AmountCents: 10}}); !errors.Is(err, redisstore.ErrGivenUp) {
		t.Fatalf("late load of a failed envelope = %v, want ErrGivenUp", err)
	}
}

// A shard that lost its data gets the ledger's name back with its new
// epoch; one a process of another ledger named first (a staging database
// started on the emptied Redis) gets no epoch, every round saying why, and
// the other shards go on.
func TestALostShardGetsTheLedgersNameBack(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	f := upkeepFlusher(t, s)
	if _, err := f.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	ledger, err := s.PG.LedgerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	k := s.Redis.Keys()
	if got := s.RDB.Get(ctx, k.Ledger(3)).Val(); got != ledger {
		t.Fatalf("shard 3's ledger name after the first round: %q, want %q", got, ledger)
	}
	loseRedis(t, s)
	if err := s.RDB.Set(ctx, k.Ledger(5), "staging", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		epochs, err := f.Reconcile(ctx)
		if !errors.Is(err, redisstore.ErrOtherLedger) || epochs[5] != "" || epochs[3] == "" {
			t.Fatalf("a round after the loss = %v, %v; want shard 5 refused (another ledger's), shard 3 given an epoch", epochs, err)
		}
	}
	if got := s.RDB.Get(ctx, k.Ledger(3)).Val(); got != ledger {
		t.Errorf("shard 3's ledger name after the loss: %q, want %q again", got, ledger)
	}
}

// An envelope left loading whose id another envelope holds in Redis (ids
// handed out again, as after PostgreSQL was restored from a backup) is
// given up and refunded whole, young or old, and the other envelope's state
// is left as it was: it was never offered.
func TestRepairGivesUpAnEnvelopeWhoseIDAnotherHolds(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	f := upkeepFlusher(t, s)
	if err := f.Upkeep(ctx, false); err != nil { // epochs
		t.Fatal(err)
	}
	for _, c := range []struct {
		id  int64
		age time.Duration
	}{{1, time.Minute}, {2, 11 * time.Minute}} {
		if _, err := s.Redis.LoadEnvelope(ctx, c.id, s.Clock.Now().Add(time.Hour), 50,
			[]redisstore.Packet{{ID: 9000 + c.id, AmountCents: 50}}); err != nil {
			t.Fatal(err)
		}
		insertLoading(t, s, c.id, s.Clock.Now().Add(-c.age))
	}
	if err := f.Upkeep(ctx, true); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{1, 2} {
		if l := readLedger(t, s, id); l.status != "failed" || l.refunded != 30 || l.claimedPackets != 0 {
			t.Errorf("envelope %d whose id another holds: %+v, want failed and its 30 cents refunded", id, l)
		}
		meta := s.RDB.HGetAll(ctx, s.Redis.Keys().Meta(id)).Val()
		if meta["status"] != "open" || meta["total"] != "50" {
			t.Errorf("the other envelope's meta under %d: %v, want it untouched (open, total 50)", id, meta)
		}
	}
}

// A batch whose conflict was committed by a flusher that died before acting
// on it still suspends the envelope when the next flusher replays it.
func TestConflictSuspendsOnReplay(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	f := upkeepFlusher(t, s)
	e, claims := expiring(t, s, 10, 1)
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	held := claims["u0"]
	// Redis granted the same packet again (it lost state): the claim is
	// queued, taken and committed, and the flusher dies before checking.
	raw := fmt.Sprintf("%d:%d:%d:%d:%s:intruder", e.ID, held.PacketID, held.AmountCents,
		s.Clock.Now().UnixMilli(), "202611219999999999")
	shard := s.Redis.Keys().Shard(e.ID)
	if err := s.RDB.LPush(ctx, s.Redis.Keys().Consumed(shard), raw).Err(); err != nil {
		t.Fatal(err)
	}
	batch, err := s.Redis.Take(ctx, shard, 10)
	if err != nil || len(batch) != 1 {
		t.Fatalf("take = %v, %v", batch, err)
	}
	q, _ := redisstore.ParseQueued(batch[0])
	if _, err := s.PG.ApplyClaims(ctx, []pgstore.Claim{{EnvelopeID: q.EnvelopeID, PacketID: q.PacketID,
		UserID: q.UserID, ClaimedAt: q.GrabbedAt, OrderNo: q.OrderNo}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := status(t, s, e.ID); got != "suspended" {
		t.Fatalf("envelope is %s after the replayed conflict, want suspended", got)
	}
}

// A batch PostgreSQL refuses is applied a claim at a time; a claim it
// contradicts on that path (a packet Redis granted again) still suspends
// its envelope, not only the envelope of the refused claim.
func TestConflictSuspendsBesideARefusedClaim(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	f := upkeepFlusher(t, s)
	a, claims := expiring(t, s, 10, 1)
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	keys := s.Redis.Keys()
	b, _ := expiring(t, s, 10, 0)
	for tries := 0; keys.Shard(b.ID) != keys.Shard(a.ID); tries++ {
		if tries == 4*keys.Shards() {
			t.Fatal("no second envelope in the first one's shard")
		}
		b, _ = expiring(t, s, 10, 0)
	}
	held := claims["u0"]
	intruder := fmt.Sprintf("%d:%d:%d:%d:%s:intruder", a.ID, held.PacketID, held.AmountCents,
		s.Clock.Now().UnixMilli(), "202611219999999998")
	// Well formed, but no timestamp PostgreSQL can store: the batch is refused.
	refused := fmt.Sprintf("%d:1:1:%d:1:time-traveller", b.ID, int64(9.3e15))
	if err := s.RDB.LPush(ctx, keys.Consumed(keys.Shard(a.ID)), intruder, refused).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := status(t, s, b.ID); got != envelope.StatusSuspended {
		t.Fatalf("envelope of the refused claim is %s, want suspended", got)
	}
	if got := status(t, s, a.ID); got != envelope.StatusSuspended {
		t.Fatalf("envelope whose packet was granted twice is %s beside a refused claim, want suspended", got)
	}
}

// Two flushers that find the same shards lost at once agree on one new
// token per shard: afterwards Redis and PostgreSQL hold the same tokens.
func TestTwoFlushersAgreeOnNewEpochs(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	a, b := upkeepFlusher(t, s), upkeepFlusher(t, s)
	if _, err := a.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	loseRedis(t, s)
	errs := make(chan error, 2)
	for _, f := range []*Flusher{a, b} {
		go func() { _, err := f.Reconcile(ctx); errs <- err }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // a round to settle what the race left
		if _, err := b.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	inRedis, _ := s.Redis.Epochs(ctx)
	recorded, _ := s.PG.Epochs(ctx, len(inRedis))
	for shard := range inRedis {
		if inRedis[shard] == "" || inRedis[shard] != recorded[shard] {
			t.Errorf("shard %d: redis %q, postgres %q", shard, inRedis[shard], recorded[shard])
		}
	}
	if _, err := s.PG.Epochs(ctx, 16); err != nil {
		t.Fatal(err)
	}
	if err := s.PG.SetEpoch(ctx, 0, "not-the-recorded-one", "x"); !errors.Is(err, pgstore.ErrWrongStatus) {
		t.Fatalf("SetEpoch over another token = %v, want ErrWrongStatus", err)
	}
}

// A suspension cut short after its Redis step (the flusher died, or
// PostgreSQL failed, before PostgreSQL recorded it) is finished by the next
// round: after a Redis loss, and for an envelope left loading (young, or
// old enough to be given up). None is taken for whole and opened.
func TestSuspensionCutShortIsFinished(t *testing.T) {
	t.Parallel()
	for _, loss := range []bool{true, false} {
		t.Run(fmt.Sprintf("loss=%v", loss), func(t *testing.T) {
			t.Parallel()
			s := stack.New(t)
			ctx := context.Background()
			f := upkeepFlusher(t, s)
			open, _ := expiring(t, s, 10, 4)
			if err := f.Upkeep(ctx, false); err != nil { // epochs
				t.Fatal(err)
			}
			var cutShort []int64
			if loss {
				if _, err := s.Svc.Grab(ctx, open.ID, "lost"); err != nil {
					t.Fatal(err)
				}
				loseRedis(t, s)
				cutShort = append(cutShort, open.ID)
			}
			now := s.Clock.Now()
			insertLoading(t, s, 7, now.Add(-time.Minute))    // young: would be loaded
			insertLoading(t, s, 8, now.Add(-11*time.Minute)) // old: would be given up
			cutShort = append(cutShort, 7, 8)
			for _, id := range cutShort { // the Redis step ran; PostgreSQL's did not
				if _, err := s.Redis.Suspend(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 {
				if err := f.Upkeep(ctx, true); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range cutShort {
				if got := status(t, s, id); got != envelope.StatusSuspended {
					t.Errorf("envelope %d suspended in Redis only is %s after the next rounds, want suspended", id, got)
				}
			}
			if n := f.Suspended(); n != int64(len(cutShort)) {
				t.Errorf("Suspended() = %d, want %d", n, len(cutShort))
			}
		})
	}
}
