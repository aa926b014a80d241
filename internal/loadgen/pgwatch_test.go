package loadgen

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/testenv"
)

// watched makes envelope 1 with n packets (ids 1..n, 10 cents each) in a
// fresh database and a watcher that was answered every packet, packet i to
// user u<i>, in id order.
func watched(t *testing.T, n int) (*pgWatcher, *Checker, *pgxpool.Pool) {
	t.Helper()
	pool, url := testenv.Postgres(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO envelopes (id, shard, sender_id, total_cents, count, status, expires_at)
		VALUES (1, 1, 's', $1, $2, 'open', now() + interval '1 hour')`, 10*n, n); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO packets (id, envelope_id, amount_cents)
		SELECT g, 1, 10 FROM generate_series(1, $1::int) g`, n); err != nil {
		t.Fatal(err)
	}
	check := NewChecker()
	check.AddEnvelope(1, n, int64(10*n))
	w, err := newPGWatcher(ctx, url, check)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	answered := time.Now()
	for i := 1; i <= n; i++ {
		g := Grant{PacketID: int64(i), AmountCents: 10, OrderNo: fmt.Sprint("o", i)}
		user := fmt.Sprint("u", i)
		check.Granted(1, user, false, 1, g, false)
		w.add(1, user, g, answered)
	}
	return w, check, pool
}

// flush claims packets from..to for users u<id>, as the flusher would.
func flush(t *testing.T, pool *pgxpool.Pool, from, to int) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `UPDATE packets SET claimed_by = 'u' || id, claimed_at = now(),
		order_no = 'o' || id WHERE id BETWEEN $1 AND $2`, from, to); err != nil {
		t.Fatal(err)
	}
}

func TestLoadgenWatcherFindsClaimsInOrderAndOutOfOrder(t *testing.T) {
	w, check, pool := watched(t, 2000)
	w.lastFull = time.Now() // the polls are windowed until the drain's last

	// In order, more than two windows at once: one poll finds them all.
	flush(t, pool, 1, 1100)
	if err := w.poll(); err != nil {
		t.Fatal(err)
	}
	if _, seen, _, _ := w.stats(); seen != 1100 {
		t.Fatalf("after a windowed poll %d claims seen, want 1100", seen)
	}
	// Out of order: a claim past the oldest pending window is found by
	// the full sweep of the drain, not by the windowed polls.
	flush(t, pool, 2000, 2000)
	if err := w.poll(); err != nil {
		t.Fatal(err)
	}
	if _, seen, _, _ := w.stats(); seen != 1100 {
		t.Fatalf("a windowed poll found a claim out of its window: %d seen", seen)
	}
	m := w.drain(200*time.Millisecond, 10*time.Millisecond)
	if _, seen, _, _ := w.stats(); seen != 1101 || m.count != 899 || m.claim.env != 1 {
		t.Fatalf("after the drain %d seen, %d missing (%+v); want 1101 seen, 899 missing", seen, m.count, m)
	}
	flush(t, pool, 1101, 1999)
	if m := w.drain(5*time.Second, 10*time.Millisecond); m.count != 0 {
		t.Fatalf("%d still missing", m.count)
	}
	lag, seen, _, _ := w.stats()
	if seen != 2000 || lag.Count != 2000 || lag.Min < 0 {
		t.Fatalf("seen %d, lags %+v", seen, lag)
	}
	claims, unanswered, err := w.verifyEnvelopes([]int64{1})
	if n, texts := check.Violations(); err != nil || claims != 2000 || unanswered != 0 || n != 0 {
		t.Fatalf("verify: %d claims, %d unanswered, %v; violations %q", claims, unanswered, err, texts)
	}
}

func TestLoadgenWatcherReportsWrongAndUnansweredClaims(t *testing.T) {
	w, check, pool := watched(t, 10)
	// Packet 3 stored for the wrong user; packet 11 claimed though nobody
	// was answered it; packet 12 by a user whose grab went unanswered.
	flush(t, pool, 1, 10)
	if _, err := pool.Exec(context.Background(), `UPDATE packets SET claimed_by = 'mallory' WHERE id = 3;
		INSERT INTO packets (id, envelope_id, amount_cents, claimed_by, claimed_at)
		VALUES (11, 1, 10, 'ghost', now()), (12, 1, 10, 'lost', now())`); err != nil {
		t.Fatal(err)
	}
	check.Refused(1, "lost", false, 0, "")
	if m := w.drain(5*time.Second, 10*time.Millisecond); m.count != 0 {
		t.Fatalf("%d missing", m.count)
	}
	claims, unanswered, err := w.verifyEnvelopes([]int64{1})
	if err != nil || claims != 12 || unanswered != 1 {
		t.Fatalf("verify: %d claims, %d unanswered, %v", claims, unanswered, err)
	}
	n, texts := check.Violations()
	all := strings.Join(texts, "\n")
	if n != 3 || !strings.Contains(all, "PostgreSQL says mallory (10 cents") ||
		!strings.Contains(all, "packet 3 answered to u3, PostgreSQL says mallory") ||
		!strings.Contains(all, "packet 11 claimed by ghost, answered to nobody") {
		t.Fatalf("violations %d:\n%s", n, all)
	}
}
