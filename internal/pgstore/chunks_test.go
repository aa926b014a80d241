package pgstore_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/pgstore"
)

// tenClaims opens envelope 1 of ten packets (1 to 10 cents, ids 100-109)
// and returns a claim of each by its own user, with its amount, in grab
// order.
func tenClaims(t *testing.T, s *pgstore.Store) []pgstore.Claim {
	t.Helper()
	open(t, s, 1, 100, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	var claims []pgstore.Claim
	for i := range 10 {
		claims = append(claims, claim(1, int64(100+i), "u"+string(rune('a'+i))))
	}
	return s.WithAmounts(t, claims)
}

// runsOf lists an envelope's runs of claim events in position order.
func runsOf(t *testing.T, pool *pgxpool.Pool, env int64) [][]int64 {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT packet_ids FROM claim_event_runs WHERE envelope_id = $1
		ORDER BY first_position`, env)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := pgx.CollectRows(rows, pgx.RowTo[[]int64])
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// wantLedger checks envelope 1's claims and cents in PostgreSQL.
func wantLedger(t *testing.T, s *pgstore.Store, pool *pgxpool.Pool, claims, cents int64) {
	t.Helper()
	if n := count(t, pool, `SELECT count(*) FROM claims WHERE envelope_id = 1`); n != claims {
		t.Errorf("%d claims, want %d", n, claims)
	}
	if e := readEnvelope(t, s, 1); e.ClaimedCents != cents {
		t.Errorf("claimed_cents %d, want %d", e.ClaimedCents, cents)
	}
}

// A batch in chunks commits each chunk in the batch's order: every claim
// once, the envelope's cents whole, and its claim events (one run a chunk)
// in grab order. Applied again, it changes nothing and reports nothing.
func TestApplyClaimsInChunksCommitsInOrder(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	claims := tenClaims(t, s)
	res, err := s.ApplyClaimsInChunks(t.Context(), claims, 3, 3)
	if err != nil || res.Applied != 10 || len(res.Conflicts) != 0 || !slices.Equal(res.SoldOut, []int64{1}) {
		t.Fatalf("ApplyClaimsInChunks = %+v, %v; want 10 applied, envelope 1 sold out", res, err)
	}
	want := [][]int64{{100, 101, 102}, {103, 104, 105}, {106, 107, 108}, {109}}
	if runs := runsOf(t, pool, 1); !slices.EqualFunc(runs, want, slices.Equal) {
		t.Errorf("runs %v, want %v", runs, want)
	}
	wantLedger(t, s, pool, 10, 55)
	res, err = s.ApplyClaimsInChunks(t.Context(), claims, 3, 3)
	if err != nil || res.Applied != 0 || len(res.Conflicts) != 0 || len(res.SoldOut) != 0 {
		t.Fatalf("again: %+v, %v; want nothing new", res, err)
	}
	wantLedger(t, s, pool, 10, 55)
}

// A flusher killed between two chunks of a batch leaves the first
// committed and the whole batch in flight: applied again, the committed
// chunk changes nothing and the rest is written once.
func TestApplyClaimsInChunksAfterAPartialCommit(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	claims := tenClaims(t, s)
	if res := mustApply(t, s, claims[:4]...); res.Applied != 4 {
		t.Fatalf("first chunk: %+v", res)
	}
	res, err := s.ApplyClaimsInChunks(t.Context(), claims, 4, 3)
	if err != nil || res.Applied != 6 || len(res.Conflicts) != 0 {
		t.Fatalf("ApplyClaimsInChunks = %+v, %v; want the 6 not yet applied", res, err)
	}
	wantLedger(t, s, pool, 10, 55)
}

// A packet granted twice (a Redis that lost state), once in each of two
// chunks COPYed at once: whichever COPY reaches the packet second waits on
// the other's uncommitted claim of it, then fails (the first chunk commits;
// or the wait outlasts the COPY's lock timeout), and what is not committed
// is applied the guarded way: the later claim becomes a conflict, the rest
// is written, nothing waits for ever.
func TestApplyClaimsInChunksWithAPacketGrantedTwice(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	claims := tenClaims(t, s)[:6]
	twice := claims[0]
	twice.UserID, twice.ClaimedAt = "z", claims[5].ClaimedAt.Add(time.Millisecond)
	batch := append(slices.Clone(claims[:3]), twice, claims[3], claims[4])
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := s.ApplyClaimsInChunks(ctx, batch, 3, 2)
	if err != nil || res.Applied != 5 ||
		!sameConflicts(res.Conflicts, []pgstore.Conflict{conflict(twice, "claimed_by_another_user")}) {
		t.Fatalf("ApplyClaimsInChunks = %+v, %v; want 5 applied and packet 100's second claim a conflict", res, err)
	}
	wantLedger(t, s, pool, 5, 1+2+3+4+5)
}

// A chunk refused while the next one's COPY is open (here a claim of a
// packet refunded after the grab): the open COPY is rolled back first, or
// the next chunk, applied again, would wait on its own uncommitted rows
// until the lock timeout failed it; then the refused chunk is applied
// guarded (the refunded packet a conflict) and the next one whole.
func TestApplyClaimsInChunksRefusedWithTheNextCopyOpen(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	claims := tenClaims(t, s)[:6]
	if _, err := pool.Exec(t.Context(), `UPDATE packet_pool SET refunded_at = now() WHERE id = 101`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := s.ApplyClaimsInChunks(ctx, claims, 3, 2)
	if err != nil || res.Applied != 5 ||
		!sameConflicts(res.Conflicts, []pgstore.Conflict{conflict(claims[1], "packet_refunded")}) {
		t.Fatalf("ApplyClaimsInChunks = %+v, %v; want 5 applied and packet 101 refused as refunded", res, err)
	}
	wantLedger(t, s, pool, 5, 1+3+4+5+6)
}

// Two chunks COPYed at once, the later one holding, first, a second grant
// of the packet the earlier one holds last (a Redis that lost state): the
// earlier COPY reaches the packet after the later one and waits on it, and
// the later chunk commits only after the earlier. The COPY's lock timeout
// ends the wait (without it this test waits for its deadline); the open
// COPYs are rolled back and the chunks applied one by one, so the earlier
// grab keeps the packet and the later one is a conflict.
func TestApplyClaimsInChunksWithAnEarlierChunkWaitingOnALaterOne(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	const n = 2000
	amounts := make([]int64, n)
	for i := range amounts {
		amounts[i] = 1
	}
	open(t, s, 1, 100, amounts)
	var claims []pgstore.Claim
	for i := range n {
		claims = append(claims, claim(1, int64(100+i), "u"+strconv.Itoa(i)))
	}
	claims = s.WithAmounts(t, claims)
	twice := claims[n-1]
	twice.UserID, twice.ClaimedAt = "z", twice.ClaimedAt.Add(time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := s.ApplyClaimsInChunks(ctx, append(slices.Clone(claims), twice), n, 2)
	if err != nil || res.Applied != n ||
		!sameConflicts(res.Conflicts, []pgstore.Conflict{conflict(twice, "claimed_by_another_user")}) {
		t.Fatalf("ApplyClaimsInChunks = %d applied, conflicts %+v, %v; want %d applied and the second grant a conflict",
			res.Applied, res.Conflicts, err, n)
	}
	wantLedger(t, s, pool, n, n)
}

// A lock held on claims (a DBA's) stalls a batch for at most the COPY's
// lock timeout: the batch fails with lock_not_available, which is not a
// refusal of its data (the flusher retries it rather than setting claims
// aside), and writes nothing; once the lock goes, the same batch is written.
func TestApplyClaimsInChunksBehindALockOnClaims(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	claims := tenClaims(t, s)
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(t.Context())) //nolint:errcheck
	if _, err := tx.Exec(t.Context(), `LOCK TABLE claims IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err = s.ApplyClaimsInChunks(ctx, claims, 3, 3)
	if !hasSQLState(err, "55P03") || pgstore.IsRefused(err) {
		t.Fatalf("ApplyClaimsInChunks behind a lock = %v; want lock_not_available (55P03), not a refusal", err)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantLedger(t, s, pool, 0, 0)
	if res, err := s.ApplyClaimsInChunks(ctx, claims, 3, 3); err != nil || res.Applied != 10 {
		t.Fatalf("after the lock: %+v, %v; want 10 applied", res, err)
	}
	wantLedger(t, s, pool, 10, 55)
}
