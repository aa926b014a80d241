package dbadmin_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// sender_daily_totals adds up each sender's envelopes per UTC day of
// creation, whatever the session's time zone; user_history lists a user's
// grabs with their envelope, and nothing unclaimed.
func TestDBAViews(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	o := newOwner(t)
	// 23:30 UTC on the 20th is the 21st in Shanghai: the view still says the 20th.
	o.exec(`INSERT INTO envelopes (id, shard, share_code, sender_id, total_cents, count, status,
	        created_at, expires_at, settled_at, claimed_cents, refunded_cents, suspended_at, suspend_reason) VALUES
	    (1, 1, 'c1', 'shop-a', 1000, 3, 'settled',   '2026-11-20 23:30Z', '2026-11-21 23:30Z', '2026-11-21 23:31Z', 700, 300, NULL, NULL),
	    (2, 2, 'c2', 'shop-a', 500,  2, 'open',      '2026-11-20 01:00Z', '2026-11-21 01:00Z', NULL, 200, 0, NULL, NULL),
	    (3, 3, 'c3', 'shop-a', 900,  3, 'suspended', '2026-11-21 00:30Z', '2026-11-22 00:30Z', NULL, 0, 0, '2026-11-21 01:00Z', 'lost'),
	    (4, 4, 'c4', 'shop-b', 100,  1, 'sold_out',  '2026-11-20 12:00Z', '2026-11-21 12:00Z', NULL, 100, 0, NULL, NULL)`)
	o.exec(`INSERT INTO packets (id, envelope_id, amount_cents, claimed_by, claimed_at, order_no, refunded_at) VALUES
	    (11, 1, 400, 'ann', '2026-11-20 23:40Z', 'o11', NULL),
	    (12, 1, 300, 'bob', '2026-11-20 23:41Z', 'o12', NULL),
	    (13, 1, 300, NULL,  NULL,                NULL,  '2026-11-21 23:31Z'),
	    (21, 2, 200, 'ann', '2026-11-20 02:00Z', 'o21', NULL),
	    (22, 2, 300, NULL,  NULL,                NULL,  NULL),
	    (31, 3, 900, NULL,  NULL,                NULL,  NULL),
	    (41, 4, 100, 'ann', '2026-11-20 12:01Z', 'o41', NULL)`)

	conn, err := o.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET TIME ZONE 'Asia/Shanghai'"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "RESET TIME ZONE") //nolint:errcheck // the pool's next user gets the default back
	got := lines(t, conn.Conn(), `SELECT day::text, sender_id, envelopes, total_cents, claimed_cents, refunded_cents,
	        outstanding_cents, finished_envelopes, suspended_envelopes
	    FROM sender_daily_totals ORDER BY day, sender_id`)
	want := []string{
		"2026-11-20 shop-a 2 1500 900 300 300 1 0",
		"2026-11-20 shop-b 1 100 100 0 0 0 0",
		"2026-11-21 shop-a 1 900 0 0 900 0 1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sender_daily_totals =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	got = lines(t, conn.Conn(), `SELECT user_id, to_char(claimed_at AT TIME ZONE 'UTC', 'MM-DD HH24:MI'), amount_cents,
	        order_no, packet_id, envelope_id, sender_id, share_code, envelope_status
	    FROM user_history ORDER BY user_id, claimed_at DESC`)
	want = []string{
		"ann 11-20 23:40 400 o11 11 1 shop-a c1 settled",
		"ann 11-20 12:01 100 o41 41 4 shop-b c4 sold_out",
		"ann 11-20 02:00 200 o21 21 2 shop-a c2 open",
		"bob 11-20 23:41 300 o12 12 1 shop-a c1 settled",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("user_history =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// lines returns each row of a query as its values joined by spaces.
func lines(t *testing.T, c *pgx.Conn, q string) []string {
	t.Helper()
	rows, err := c.Query(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = fmt.Sprint(v)
		}
		out = append(out, strings.Join(parts, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
