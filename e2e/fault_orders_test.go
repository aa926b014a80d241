package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"redpacket/internal/testenv"
)

// Redis comes back from an older copy of its data: a snapshot (SAVE) taken
// after some grabs, more grabs answered after it, then SIGKILL and a restart
// from the snapshot. The grants after the snapshot are lost with Redis (the
// documented risk of a snapshot), but no order number is ever answered
// twice: the shards' counters came back behind numbers already answered, and
// the grab script hands out none until they are fenced above everything
// PostgreSQL reserved. Holders whose claims the snapshot kept are answered
// their packet at once, before any fence.
//
// The flusher is paused from the snapshot until the grabs after the restart
// are answered, so none of the lost grants reaches PostgreSQL and no
// envelope is suspended meanwhile: the grabs after the restart are granted,
// which is when numbers would repeat.
func TestFaultRedisSnapshotRollback(t *testing.T) {
	t.Parallel()
	rs := startRedisProc(t, false)
	dbURL := testenv.PostgresURL(t)
	s := startStack(t, dbURL, rs.url(), "rp")
	_, ids := s.createEnvelopes(t, 3600, 200, 200, 200) // three shards
	client := grabClient()
	defer client.CloseIdleConnections()
	log := newLoadLog()
	grabAll := func(tag string, users int) []grabEvent {
		return grabEachOnce(client, s.base, ids, log, tag, users)
	}
	answered := grabAll("kept", 15)
	// A grab whose answer was lost (a timeout on a loaded machine) may be
	// granted after it: every kept grab's outcome is learnt before the
	// snapshot, so the snapshot holds every grant of this phase and none of
	// its grabs can be granted after it (a user's later grab of the same
	// envelope is a repeat or a refusal).
	log.resolve(s.base, 10*time.Second)
	if u := log.unknownUsers(); len(u) > 0 {
		t.Fatalf("%d grabs before the snapshot never got a definitive answer, e.g. %+v", len(u), u[0])
	}
	kept := log.grants()

	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + rs.port})
	defer func() { _ = rdb.Close() }()
	if err := rdb.Save(context.Background()).Err(); err != nil {
		t.Fatalf("SAVE: %v", err)
	}
	if err := s.flusher.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.flusher.cmd.Process.Signal(syscall.SIGCONT) })
	lost := grabAll("lost", 15)
	rs.kill(t)
	rs.launch(t) // from the snapshot

	// Holders first: the counters are not fenced yet, and no number is
	// needed. (A grab may still meet a connection of the grabber's pool that
	// died with Redis: it is asked again.)
	assertHoldersRepeat(t, client, s.base, kept)
	after := grabAll("after", 20)
	log.resolve(s.base, 10*time.Second)
	if err := s.flusher.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("load: %s", log.summary())

	assertMostGranted(t, map[string][]grabEvent{"before the snapshot": answered, "after the snapshot": lost, "after the restart": after})
	checkOrderNumbersOnce(t, log.eventsCopy())

	// PostgreSQL gets the grants it can, each with the number answered.
	db := connectTestDB(t, dbURL)
	waitOrdersInPG(t, db, ids, after, log.eventsCopy())
	var reused int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM claim_conflicts WHERE reason = 'order_no_in_use'`).Scan(&reused); err != nil {
		t.Fatal(err)
	}
	if reused > 0 {
		t.Errorf("%d claims reached PostgreSQL with an order number already in use", reused)
	}
	s.stop(t)
}

// grabEachOnce has users tag-0 .. tag-(users-1) each grab every envelope of
// ids once, in turn, recorded in log; it returns the answers.
func grabEachOnce(client *http.Client, base string, ids []int64, log *loadLog, tag string, users int) []grabEvent {
	var out []grabEvent
	for u := range users {
		for _, id := range ids {
			e := grabOnce(client, base, id, fmt.Sprintf("%s-%d", tag, u))
			log.record(e)
			out = append(out, e)
		}
	}
	return out
}

// assertHoldersRepeat fails the test unless each holder of kept, grabbing
// again (asked again up to 20 times while the answer is not definitive),
// is answered the repeat of its packet and order number.
func assertHoldersRepeat(t *testing.T, client *http.Client, base string, kept []grabEvent) {
	t.Helper()
	for _, e := range kept {
		again := grabOnce(client, base, e.Env, e.User)
		for try := 0; !again.definitive() && try < 20; try++ {
			time.Sleep(50 * time.Millisecond)
			again = grabOnce(client, base, e.Env, e.User)
		}
		if again.Status != 200 || !again.Repeat || again.Packet != e.Packet || again.Order != e.Order {
			t.Errorf("holder %s of envelope %d after the restart: %s packet %d order %s; want the repeat of packet %d order %s",
				e.User, e.Env, again.key(), again.Packet, again.Order, e.Packet, e.Order)
		}
	}
}

// assertMostGranted fails the test unless at least half of each phase's
// grabs were granted a first time: otherwise the test shows nothing.
func assertMostGranted(t *testing.T, phases map[string][]grabEvent) {
	t.Helper()
	for name, es := range phases {
		granted := 0
		for _, e := range es {
			if e.Status == 200 && !e.Repeat {
				granted++
			}
		}
		if granted < len(es)/2 {
			t.Errorf("%s only %d of %d grabs were granted: the test shows nothing", name, granted, len(es))
		}
	}
}

// checkOrderNumbersOnce fails the test when an order number was answered
// with two different grants (another user, envelope or packet).
func checkOrderNumbersOnce(t *testing.T, events []grabEvent) {
	t.Helper()
	first := map[string]grabEvent{}
	twice := 0
	for _, e := range events {
		if e.Status != 200 {
			continue
		}
		p, ok := first[e.Order]
		switch {
		case !ok:
			first[e.Order] = e
		case p.Env != e.Env || p.User != e.User || p.Packet != e.Packet:
			if twice++; twice <= 10 {
				t.Errorf("order number %s answered to user %s (envelope %d, packet %d) and to user %s (envelope %d, packet %d)",
					e.Order, p.User, p.Env, p.Packet, e.User, e.Env, e.Packet)
			}
		}
	}
	if twice > 0 {
		t.Errorf("%d answers repeat an order number given to another grant", twice)
	}
	t.Logf("%d distinct order numbers answered", len(first))
}

// waitOrdersInPG waits (up to 20 s) until PostgreSQL holds each granted
// grab of es with the order number it was answered.
func waitOrdersInPG(t *testing.T, db *pgx.Conn, ids []int64, es, all []grabEvent) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rows, err := db.Query(context.Background(), `SELECT envelope_id, claimed_by, coalesce(order_no, '')
			FROM packets WHERE envelope_id = ANY($1) AND claimed_by IS NOT NULL`, ids)
		if err != nil {
			t.Fatal(err)
		}
		have := map[envUser]string{}
		var env int64
		var user, order string
		if _, err := pgx.ForEachRow(rows, []any{&env, &user, &order}, func() error {
			have[envUser{env, user}] = order
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		var missing []string
		for _, e := range es {
			if e.Status == 200 && have[envUser{e.Env, e.User}] != e.Order {
				missing = append(missing, fmt.Sprintf("envelope %d user %s order %s (postgres: %q)", e.Env, e.User, e.Order, have[envUser{e.Env, e.User}]))
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			sort.Strings(missing)
			explainMissing(t, db, es, all)
			t.Fatalf("after 20s postgres lacks %d answered grants, e.g. %s", len(missing), missing[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// explainMissing logs, for each grant of es that PostgreSQL lacks, who
// PostgreSQL says holds the packet (user, order number, claim time) and the
// conflicts recorded for it, and every answer of all (the test's whole log)
// to that holder for that envelope: the evidence of which answer reached
// the ledger first.
func explainMissing(t *testing.T, db *pgx.Conn, es, all []grabEvent) {
	t.Helper()
	ctx := context.Background()
	for _, e := range es {
		if e.Status != 200 {
			continue
		}
		var holder, order string
		var at time.Time
		err := db.QueryRow(ctx, `SELECT coalesce(claimed_by, ''), coalesce(order_no, ''), coalesce(claimed_at, 'epoch')
			FROM packets WHERE id = $1`, e.Packet).Scan(&holder, &order, &at)
		if err != nil {
			t.Logf("packet %d: %v", e.Packet, err)
			continue
		}
		if holder == e.User && order == e.Order {
			continue
		}
		t.Logf("answered %s envelope %d packet %d order %s at %s; postgres: holder %q order %q claimed at %s",
			e.User, e.Env, e.Packet, e.Order, e.Got.Format(time.StampMicro), holder, order, at.Format(time.StampMicro))
		for _, h := range all {
			if h.User == holder && h.Env == e.Env {
				t.Logf("  answer to %s: %s packet %d order %s, sent %s, answered %s", h.User, h.key(), h.Packet, h.Order,
					h.Sent.Format(time.StampMicro), h.Got.Format(time.StampMicro))
			}
		}
		rows, err := db.Query(ctx, `SELECT user_id, reason, claimed_at FROM claim_conflicts WHERE packet_id = $1`, e.Packet)
		if err != nil {
			t.Logf("claim_conflicts of packet %d: %v", e.Packet, err)
			continue
		}
		var user, reason string
		_, _ = pgx.ForEachRow(rows, []any{&user, &reason, &at}, func() error {
			t.Logf("  conflict: user %s %s, claimed at %s", user, reason, at.Format(time.StampMicro))
			return nil
		})
	}
}
