package pgstore_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

func TestViews(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	open(t, s, 1, 100, []int64{10, 20, 30, 40})
	open(t, s, 2, 200, []int64{5, 6})
	insert(t, s, 3, 300, []int64{1, 2, 3}, t0) // loading, untouched
	apply(t, s, claim(1, 100, "alice"), claim(1, 102, "bob"), claim(2, 200, "alice"), claim(2, 201, "carol"))
	if _, err := pool.Exec(ctx, `UPDATE packets SET order_no = '20300517000001' WHERE id = 100`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE envelopes SET refunded_cents = 60, status = 'settled', settled_at = $1 WHERE id = 1`, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}

	got := envelopeTotalsRows(t, pool)
	want := []envelopeTotals{
		{1, "sender-1", "settled", 4, 100, 2, 40, 2, 60, true},
		{2, "sender-1", "sold_out", 2, 11, 2, 11, 0, 0, false},
		{3, "sender-1", "loading", 3, 6, 0, 0, 3, 0, false},
	}
	if !slices.Equal(got, want) {
		t.Errorf("envelope_totals =\n%+v\nwant\n%+v", got, want)
	}

	grabs := userGrabRows(t, pool)
	wantGrabs := []string{
		"alice 1 100 10 20300517000001",
		"alice 2 200 5 -",
		"bob 1 102 30 -",
		"carol 2 201 6 -",
	}
	if !slices.Equal(grabs, wantGrabs) {
		t.Errorf("user_grabs =\n%v\nwant\n%v", grabs, wantGrabs)
	}
}

// envelopeTotals is a row of the envelope_totals view.
type envelopeTotals struct {
	id                        int64
	sender, status            string
	count                     int
	total, grabbedN, grabbedC int64
	remaining, refunded       int64
	settled                   bool
}

// envelopeTotalsRows reads the envelope_totals view, by envelope.
func envelopeTotalsRows(t *testing.T, pool *pgxpool.Pool) []envelopeTotals {
	t.Helper()
	ctx := t.Context()
	rows, err := pool.Query(ctx, `SELECT envelope_id, sender_id, status, count, total_cents, grabbed_count,
		grabbed_cents, remaining_count, refunded_cents, settled_at IS NOT NULL FROM envelope_totals ORDER BY envelope_id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []envelopeTotals
	for rows.Next() {
		var r envelopeTotals
		if err := rows.Scan(&r.id, &r.sender, &r.status, &r.count, &r.total, &r.grabbedN, &r.grabbedC,
			&r.remaining, &r.refunded, &r.settled); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return got
}

// userGrabRows reads the user_grabs view as "user envelope packet amount
// order" lines, by user and packet, and checks each grab's time.
func userGrabRows(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	ctx := t.Context()
	rows, err := pool.Query(ctx, `SELECT user_id, envelope_id, packet_id, amount_cents, coalesce(order_no, '-'), claimed_at
		FROM user_grabs ORDER BY user_id, packet_id`)
	if err != nil {
		t.Fatal(err)
	}
	var grabs []string
	for rows.Next() {
		var user, order string
		var env, packet, amount int64
		var at time.Time
		if err := rows.Scan(&user, &env, &packet, &amount, &order, &at); err != nil {
			t.Fatal(err)
		}
		if want := claim(env, packet, user).ClaimedAt; !at.Equal(want) {
			t.Errorf("grab of packet %d at %v, want %v", packet, at, want)
		}
		grabs = append(grabs, fmt.Sprintf("%s %d %d %d %s", user, env, packet, amount, order))
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return grabs
}

// The packets view takes writes for repairs and archive loads: each reaches
// packet_pool and claims as the view shows them, and a packet both claimed
// and refunded is refused as the table's check refused it.
func TestPacketsViewWrites(t *testing.T) {
	t.Parallel()
	_, pool := newStore(t)
	ctx := t.Context()
	exec := func(q string) error {
		_, err := pool.Exec(ctx, q)
		return err
	}
	rows := func() string {
		return fmt.Sprint(count(t, pool, `SELECT count(*) FROM packet_pool WHERE envelope_id = 9`),
			count(t, pool, `SELECT count(*) FROM claims WHERE envelope_id = 9`),
			count(t, pool, `SELECT coalesce(sum(amount_cents), 0) FROM claims WHERE envelope_id = 9`))
	}
	if err := exec(`INSERT INTO packets (id, envelope_id, amount_cents, claimed_by, claimed_at, order_no, refunded_at) VALUES
		(900, 9, 7, 'ann', now(), '203005170000000009', NULL), (901, 9, 8, NULL, NULL, NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	if got := rows(); got != "2 1 7" {
		t.Errorf("after the insert: pool, claims, claimed cents = %s; want 2 1 7", got)
	}
	if err := exec(`UPDATE packets SET claimed_by = 'bo', claimed_at = now() WHERE id = 901`); err != nil {
		t.Fatal(err)
	}
	if err := exec(`UPDATE packets SET claimed_by = NULL, claimed_at = NULL, order_no = NULL WHERE id = 900`); err != nil {
		t.Fatal(err)
	}
	if got := rows(); got != "2 1 8" {
		t.Errorf("after moving the claim: pool, claims, claimed cents = %s; want 2 1 8", got)
	}
	if err := exec(`UPDATE packets SET refunded_at = now() WHERE id = 901`); !hasSQLState(err, "23514") {
		t.Errorf("refunding a claimed packet through the view: %v; want a check violation", err)
	}
	if err := exec(`DELETE FROM packets WHERE envelope_id = 9`); err != nil {
		t.Fatal(err)
	}
	if got := rows(); got != "0 0 0" {
		t.Errorf("after the delete: pool, claims, claimed cents = %s; want 0 0 0", got)
	}
}
