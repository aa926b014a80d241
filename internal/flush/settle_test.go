package flush

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/telemetry"
	"redpacket/internal/testenv/stack"
)

// expiring creates an envelope of count packets of 100 cents that expires a
// minute from the stack's clock, and grabs n of them.
func expiring(t *testing.T, s *stack.Stack, count, n int) (grab.Envelope, map[string]grab.Claim) {
	t.Helper()
	ctx := context.Background()
	secs := int64(60)
	e, err := s.Svc.Create(ctx, envelope.CreateRequest{
		SenderID: "s", TotalCents: int64(count) * 100, Count: int64(count), ExpiresInSeconds: &secs,
	})
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]grab.Claim{}
	for i := range n {
		u := fmt.Sprintf("u%d", i)
		if claims[u], err = s.Svc.Grab(ctx, e.ID, u); err != nil {
			t.Fatal(err)
		}
	}
	return e, claims
}

// upkeepFlusher is a flusher on the stack's clock.
func upkeepFlusher(t *testing.T, s *stack.Stack) *Flusher {
	f := newFlusher(t, s, Config{KeyTTL: time.Hour})
	f.now = s.Clock.Now
	return f
}

// ledger is an envelope's money as PostgreSQL holds it.
type ledger struct {
	status                                  string
	claimed, refunded, total                int64
	claimedPackets, refundedPackets, unpaid int
}

func readLedger(t *testing.T, s *stack.Stack, id int64) ledger {
	t.Helper()
	var l ledger
	err := s.Pool.QueryRow(context.Background(), `SELECT e.status, e.claimed_cents, e.refunded_cents, e.total_cents,
		count(*) FILTER (WHERE p.claimed_by IS NOT NULL), count(*) FILTER (WHERE p.refunded_at IS NOT NULL),
		count(*) FILTER (WHERE p.claimed_by IS NULL AND p.refunded_at IS NULL)
		FROM envelopes e JOIN packets p ON p.envelope_id = e.id WHERE e.id = $1 GROUP BY e.id`, id).
		Scan(&l.status, &l.claimed, &l.refunded, &l.total, &l.claimedPackets, &l.refundedPackets, &l.unpaid)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// wantSettled checks that exactly the answered claims are paid and the rest
// refunded.
func wantSettled(t *testing.T, s *stack.Stack, id int64, claims map[string]grab.Claim) {
	t.Helper()
	var cents int64
	for _, c := range claims {
		cents += c.AmountCents
	}
	l := readLedger(t, s, id)
	if l.status != "settled" || l.claimed+l.refunded != l.total || l.claimedPackets != len(claims) ||
		l.unpaid != 0 || l.claimed != cents {
		t.Fatalf("after settlement: %+v; want settled with %d packets (%d cents) claimed, the rest refunded",
			l, len(claims), cents)
	}
}

func TestSettleExpiredEnvelope(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	e, claims := expiring(t, s, 10, 4)
	f := upkeepFlusher(t, s)
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Upkeep(ctx, false); err != nil {
		t.Fatal(err)
	}
	if l := readLedger(t, s, e.ID); l.status != "open" {
		t.Fatalf("settled before expiry: %+v", l)
	}
	s.Clock.Advance(61 * time.Second)
	if err := f.Upkeep(ctx, false); err != nil {
		t.Fatal(err)
	}
	wantSettled(t, s, e.ID, claims)

	keys := s.Redis.Keys()
	if n, _ := s.RDB.Exists(ctx, keys.Pool(e.ID)).Result(); n != 0 {
		t.Error("the pool of a settled envelope is still in redis")
	}
	held := keys.ClaimBucketKeys(e.ID, int(e.Count))[:1] // 10 packets: one bucket
	for _, k := range append([]string{keys.Meta(e.ID)}, held...) {
		if ttl, _ := s.RDB.PTTL(ctx, k).Result(); ttl <= 0 || ttl > time.Hour {
			t.Errorf("%s has ttl %v, want up to the configured hour", k, ttl)
		}
	}
	assertAnswersAfterSettlement(t, s, e.ID, claims)
	// Once the keys are gone, PostgreSQL answers the same.
	if err := s.RDB.Del(ctx, append([]string{keys.Meta(e.ID)}, held...)...).Err(); err != nil {
		t.Fatal(err)
	}
	assertAnswersAfterSettlement(t, s, e.ID, claims)
}

func assertAnswersAfterSettlement(t *testing.T, s *stack.Stack, id int64, claims map[string]grab.Claim) {
	t.Helper()
	ctx := context.Background()
	for u, want := range claims {
		got, err := s.Svc.Grab(ctx, id, u)
		if err != nil || !got.Repeat || got.PacketID != want.PacketID || got.AmountCents != want.AmountCents ||
			got.OrderNo != want.OrderNo || !got.GrabbedAt.Equal(want.GrabbedAt) {
			t.Errorf("repeat grab by %s after settlement = %+v, %v; want %+v", u, got, err, want)
		}
	}
	if _, err := s.Svc.Grab(ctx, id, "newcomer"); !errors.Is(err, grab.ErrExpired) {
		t.Errorf("new grab after settlement = %v, want ErrExpired", err)
	}
}

func TestSettleWaitsForQueuedClaimsAndRefusesLateGrabs(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	e, claims := expiring(t, s, 10, 4)
	f := upkeepFlusher(t, s)
	s.Clock.Advance(61 * time.Second)
	if err := f.Settle(ctx); err != nil { // the claims are still queued
		t.Fatal(err)
	}
	if l := readLedger(t, s, e.ID); l.status != "expired" || l.refundedPackets != 0 {
		t.Fatalf("settled while claims were queued: %+v", l)
	}
	// A grabber whose clock runs late still cannot get a packet: the
	// envelope is closed in Redis.
	late := time.Now().Add(-time.Hour)
	if _, err := s.Redis.Grab(ctx, e.ID, "late", late); !errors.Is(err, redisstore.ErrClosed) {
		t.Fatalf("grab by a late clock after the close = %v, want ErrClosed", err)
	}
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	wantSettled(t, s, e.ID, claims)
}

func TestSettleSoldOutAtOnce(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	e, claims := expiring(t, s, 5, 5)
	f := upkeepFlusher(t, s)
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	wantSettled(t, s, e.ID, claims)
	if l := readLedger(t, s, e.ID); l.refunded != 0 {
		t.Fatalf("a sold-out envelope refunded %d cents", l.refunded)
	}
}

func TestSettlementStoppedHalfWayCompletes(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	e, claims := expiring(t, s, 10, 3)
	f := upkeepFlusher(t, s)
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	s.Clock.Advance(61 * time.Second)
	f.afterClose = func(int64) error { return errCrash }
	if err := f.Settle(ctx); !errors.Is(err, errCrash) {
		t.Fatalf("Settle = %v, want the crash", err)
	}
	if l := readLedger(t, s, e.ID); l.status != "open" || l.refundedPackets != 0 {
		t.Fatalf("after a crash between close and refund: %+v", l)
	}
	f.afterClose = nil
	if err := f.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	wantSettled(t, s, e.ID, claims)
	if err := f.Settle(ctx); err != nil { // nothing is settled twice
		t.Fatal(err)
	}
	wantSettled(t, s, e.ID, claims)
	assertAnswersAfterSettlement(t, s, e.ID, claims)
}

// A shard whose epoch cannot be read (its Cluster master down; here its key
// holds a list, so only its GET fails) is neither taken for lost nor
// settled, and holds up no other shard: the envelopes of the others are
// settled in the same round, and its own once it can be read again.
func TestUnreadableShardHoldsUpOnlyItself(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	f := upkeepFlusher(t, s)
	byShard := map[int]int64{}
	for len(byShard) < 2 {
		e, _ := expiring(t, s, 4, 2)
		row, err := s.PG.Envelope(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		byShard[row.Shard] = e.ID
	}
	if err := f.Upkeep(ctx, false); err != nil { // the epochs recorded
		t.Fatal(err)
	}
	var down, up int64
	var downShard int
	for shard, id := range byShard {
		if down == 0 {
			down, downShard = id, shard
		} else {
			up = id
		}
	}
	if st := status(t, s, down); st != "open" {
		t.Fatalf("envelope %d is %s before it expired", down, st)
	}
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	key := s.Redis.Keys().Epoch(downShard)
	token, err := s.RDB.Get(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RDB.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.RDB.RPush(ctx, key, "not a token").Err(); err != nil {
		t.Fatal(err)
	}
	s.Clock.Advance(2 * time.Minute) // both expire
	var unread *redisstore.EpochsUnread
	if err := f.Upkeep(ctx, true); !errors.As(err, &unread) || !unread.Unread(downShard) {
		t.Fatalf("upkeep with shard %d unreadable: %v, want it named", downShard, err)
	}
	if st := status(t, s, up); st != "settled" {
		t.Errorf("envelope %d of a readable shard is %s, want settled", up, st)
	}
	if st := status(t, s, down); st != "open" {
		t.Errorf("envelope %d of the unreadable shard is %s, want open (left alone)", down, st)
	}
	if err := s.RDB.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.RDB.Set(ctx, key, token, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.Upkeep(ctx, true); err != nil {
		t.Fatal(err)
	}
	if st := status(t, s, down); st != "settled" {
		t.Errorf("envelope %d is %s once its shard is readable, want settled", down, st)
	}
}

// The waiting claims are counted even when PostgreSQL cannot be read: the
// stall alert reads the gauge, and claims pile up most then. Not parallel:
// the gauge is the process's, and the other tests' flushers set it too.
func TestPendingCountedWhilePostgresIsDown(t *testing.T) {
	s := stack.New(t)
	e, _ := s.Grabbed(t, 10, 4)
	shard := s.Redis.Keys().Shard(e.ID)
	pool, err := pgxpool.New(t.Context(), s.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	pool.Close() // every query now fails
	f := New(s.Redis, pgstore.New(pool), Config{KeyTTL: time.Hour}, zaptest.NewLogger(t))
	gauge := telemetry.PendingClaims.WithLabelValues(strconv.Itoa(shard))
	gauge.Set(0)
	if err := f.Upkeep(context.Background(), false); err == nil {
		t.Fatal("upkeep without PostgreSQL succeeded")
	}
	if got := testutil.ToFloat64(gauge); got != 4 {
		t.Errorf("pending claims of shard %d = %v, want 4", shard, got)
	}
}

// More envelopes due than a settlement round takes are settled one round
// after another, between passes of claims, not a round every SETTLE_EVERY.
func TestSettleBacklogInRoundsBackToBack(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	var ids []int64
	for range 7 {
		e, _ := expiring(t, s, 1, 0)
		ids = append(ids, e.ID)
	}
	s.Clock.Advance(61 * time.Second)
	f := newFlusher(t, s, Config{KeyTTL: time.Hour, SettleEvery: time.Hour, IdleWait: 10 * time.Millisecond})
	f.now = s.Clock.Now
	f.settleBatch = 3
	runInBackground(t, f)
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range ids {
		for readLedger(t, s, id).status != "settled" {
			if time.Now().After(deadline) {
				t.Fatalf("envelope %d not settled 10 s into a run whose rounds come an hour apart, 3 at a time", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// A SETTLED_KEY_TTL shorter than a settlement takes (its claims still on
// their way to PostgreSQL) does not let the keys go before it is settled,
// which would read as a Redis loss and suspend it; once settled, the keys
// get that lifetime.
func TestShortKeyTTLOutlivesTheSettlement(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	e, claims := expiring(t, s, 10, 4) // the grabs wait in the queue
	const keyTTL = time.Second
	f := newFlusher(t, s, Config{KeyTTL: keyTTL})
	f.now = s.Clock.Now
	s.Clock.Advance(61 * time.Second)
	if err := f.Upkeep(ctx, false); err != nil { // closed; the claims are not in PostgreSQL yet
		t.Fatal(err)
	}
	time.Sleep(keyTTL + 200*time.Millisecond) // longer than SETTLED_KEY_TTL
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Upkeep(ctx, false); err != nil {
		t.Fatal(err)
	}
	// Read at once: the lifetime runs out a second after the settlement.
	ttl := s.RDB.PTTL(ctx, s.Redis.Keys().Meta(e.ID)).Val()
	wantSettled(t, s, e.ID, claims)
	if ttl <= 0 || ttl > keyTTL {
		t.Errorf("settled envelope's meta lives %v more, want at most SETTLED_KEY_TTL (%s)", ttl, keyTTL)
	}
}

// Rounds follow one another at once only while they get somewhere: a full
// round of envelopes still waiting for their claims, or with a failure (a
// failing envelope, oldest first, is in every round), waits SETTLE_EVERY,
// which keeps the claims' loop at its pace and its backoff from climbing.
func TestSettleMoreOnlyWhenARoundGetsSomewhere(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	for range 3 {
		expiring(t, s, 10, 2) // the grabs wait in the queue
	}
	s.Clock.Advance(61 * time.Second)
	f := upkeepFlusher(t, s)
	f.settleBatch = 2
	step := func(what string, want bool) {
		t.Helper()
		err := f.Upkeep(ctx, false)
		if f.settleMore != want {
			t.Errorf("%s: settleMore %v (upkeep: %v), want %v", what, f.settleMore, err, want)
		}
	}
	step("a full round waiting for its claims", false)
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	f.afterClose = func(int64) error { return errCrash }
	step("a full round that failed", false)
	f.afterClose = nil
	step("a full round settled", true)
	step("the last one", false)
}

// A round that suspends envelopes (their Redis state gone) gets somewhere
// too: they leave the due ones, and the next round follows at once.
func TestSettleMoreAfterARoundOfSuspensions(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	var ids []int64
	for range 3 {
		e, _ := expiring(t, s, 10, 0)
		ids = append(ids, e.ID)
	}
	f := upkeepFlusher(t, s)
	f.settleBatch = 2
	if err := f.Upkeep(ctx, false); err != nil { // the shards' data checked: nothing due yet
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := s.RDB.Del(ctx, s.Redis.Keys().Meta(id)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s.Clock.Advance(61 * time.Second)
	if err := f.Upkeep(ctx, false); err != nil {
		t.Fatal(err)
	}
	if f.Suspended() != 2 || !f.settleMore {
		t.Errorf("a full round of suspensions: %d suspended, settleMore %v; want 2, true", f.Suspended(), f.settleMore)
	}
}
