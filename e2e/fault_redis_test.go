package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"redpacket/internal/testenv"
)

// redisProc is a redis-server of the test's own, on a free loopback port,
// that the test kills and restarts.
type redisProc struct {
	port string
	args []string
	cmd  *exec.Cmd
	outs []*bytes.Buffer // output of each run
}

// startRedisProc runs redis-server in the foreground with its data in a
// directory of the test; with aof, every write is in the append-only file
// before it is answered, otherwise nothing survives a restart.
func startRedisProc(t *testing.T, aof bool) *redisProc {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server (Redis 7) is not on the PATH: install it (e.g. apt-get install redis-server) to run the Redis fault tests")
	}
	_, port, _ := net.SplitHostPort(freeAddr(t))
	appendonly := "no"
	if aof {
		appendonly = "yes"
	}
	r := &redisProc{port: port, args: []string{
		"--port", port, "--bind", "127.0.0.1", "--dir", t.TempDir(), "--daemonize", "no",
		"--appendonly", appendonly, "--appendfsync", "always", "--save", "",
	}}
	r.args = append([]string{bin}, r.args...)
	t.Cleanup(func() {
		if r.cmd != nil {
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
		}
		if t.Failed() {
			for i, b := range r.outs {
				t.Logf("redis-server run %d output:\n%s", i+1, b)
			}
		}
	})
	r.launch(t)
	return r
}

func (r *redisProc) url() string { return "redis://127.0.0.1:" + r.port + "/0" }

// launch starts the server and waits until it answers PING (an AOF is
// replayed first).
func (r *redisProc) launch(t *testing.T) {
	t.Helper()
	out := &bytes.Buffer{}
	r.outs = append(r.outs, out)
	r.cmd = exec.Command(r.args[0], r.args[1:]...)
	r.cmd.Stdout, r.cmd.Stderr = out, out
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + r.port, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %s does not answer PING after 15s: %v", r.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill SIGKILLs the server and reaps it.
func (r *redisProc) kill(t *testing.T) {
	t.Helper()
	_ = r.cmd.Process.Kill()
	if err := r.cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("redis-server had stopped on its own before SIGKILL: %v\n%s", err, r.outs[len(r.outs)-1])
	}
	r.cmd = nil
}

// Redis with an append-only file fsynced on every write is SIGKILLed under a
// grab load and restarted from the same directory: it replays the AOF, so
// every grab answered before the kill is still there. Grabs during the
// outage fail (503 or no answer); those users ask again until they learn the
// outcome. PostgreSQL ends with every answered grab exactly once, no envelope
// is suspended (nothing was lost), and the audit passes.
func TestFaultRedisAOFRestart(t *testing.T) {
	t.Parallel()
	rs := startRedisProc(t, true)
	dbURL := testenv.PostgresURL(t)
	s := startStack(t, dbURL, rs.url(), "rp")
	_, ids := s.createEnvelopes(t, 3600, 1500, 2500, 4000, 6000)

	load := startLoad(t, s.base, ids, loadSpec{Workers: 8, For: 5 * time.Second, Max: 40000, Pace: 2 * time.Millisecond, Tag: "a"})
	time.Sleep(1500 * time.Millisecond) // load before the fault
	rs.kill(t)
	killed := time.Now()
	time.Sleep(time.Second) // the outage
	rs.launch(t)
	back := time.Now()
	log := load.wait()
	log.resolve(s.base, 10*time.Second)
	t.Logf("redis down %s; load: %s", back.Sub(killed).Round(time.Millisecond), log.summary())

	after := 0
	for _, e := range log.eventsCopy() {
		if e.Status == 200 && e.Sent.After(back) {
			after++
		}
	}
	if after == 0 {
		t.Error("no grab was answered 200 after redis came back")
	}
	if u := log.unknownUsers(); len(u) > 0 {
		t.Errorf("%d users never learned whether their grab was granted, e.g. %+v", len(u), u[0])
	}
	assertLedger(t, s, ledgerSpec{Envelopes: ids, Logs: []*loadLog{log}})
	db := connectTestDB(t, dbURL)
	assertNoConflicts(t, db)
	byStatus := envelopeStatusCounts(t, db, ids)
	if byStatus["suspended"] > 0 {
		t.Errorf("envelopes suspended although redis lost nothing: %v", byStatus)
	}
	t.Logf("envelopes by status: %v", byStatus)
	s.stop(t)
}

// Redis without persistence is SIGKILLed under a grab load and comes back
// empty. The flusher must suspend every open envelope within a few seconds,
// and no packet may be offered again meanwhile: grabs answer 503 unavailable.
// Grabs answered before the kill but not yet flushed are lost with Redis (the
// documented risk of running without persistence); every claim PostgreSQL
// holds was still answered to its user. An operator then refunds one
// suspended envelope (after a dry run that changes nothing) and reloads
// another, which serves new users again.
func TestFaultRedisLostState(t *testing.T) {
	t.Parallel()
	rs := startRedisProc(t, false)
	dbURL := testenv.PostgresURL(t)
	s := startStack(t, dbURL, rs.url(), "rp")
	_, ids := s.createEnvelopes(t, 3600, 3000, 3000, 3000, 3000)
	db := connectTestDB(t, dbURL)

	load := startLoad(t, s.base, ids, loadSpec{Workers: 8, For: 4 * time.Second, Max: 40000, Pace: 2 * time.Millisecond, Tag: "l"})
	time.Sleep(1500 * time.Millisecond) // load before the fault
	rs.kill(t)
	killed := time.Now()
	time.Sleep(time.Second) // the outage
	rs.launch(t)
	back := time.Now()
	suspendedIn := waitEnvelopesStatus(t, db, ids, "suspended", 10*time.Second)
	log := load.wait()
	t.Logf("redis killed at %s, back at %s, envelopes suspended %s later; load: %s",
		killed.Format("15:04:05.000"), back.Format("15:04:05.000"), suspendedIn.Round(time.Millisecond), log.summary())

	// Nothing was offered again: a grab asked after the kill reaches either
	// no Redis or the empty one, so it must not be granted.
	assertNoGrantSentAfter(t, log, killed, back)
	c := grabClient()
	assertSuspendedRefuse(t, s, db, c, ids)
	// Answers given before the kill may be lost; every claim in PostgreSQL
	// must still be one that was answered.
	mayBeLost := func(e grabEvent) bool { return e.Sent.Before(killed) }
	assertLedger(t, s, ledgerSpec{Envelopes: ids, Logs: []*loadLog{log}, MayBeLost: mayBeLost})

	// While envelopes are suspended the audit exits 3 (no violation, but an
	// operator is needed), so a cron job notices.
	if code, out := run(t, "flusher", s.env, "audit"); code != 3 || !strings.Contains(out, "SUSPENDED envelope") {
		t.Errorf("flusher audit with suspended envelopes: exit %d, want 3:\n%s", code, out)
	}

	recoverByRefund(t, s, db, c, ids[0])
	rlog := recoverByReload(t, s, db, c, ids[1])
	// The reloaded envelope's new grants must all reach PostgreSQL; the
	// earlier answers keep their allowance.
	assertLedger(t, s, ledgerSpec{Envelopes: ids, Logs: []*loadLog{log, rlog}, MayBeLost: mayBeLost})
	t.Logf("envelopes by status: %v", envelopeStatusCounts(t, db, ids))
	s.stop(t)
}

// assertNoGrantSentAfter fails the test for each grab of the log sent after
// Redis was killed and answered 200.
func assertNoGrantSentAfter(t *testing.T, log *loadLog, killed, back time.Time) {
	t.Helper()
	for _, e := range log.eventsCopy() {
		if e.Status == 200 && e.Sent.After(killed) {
			t.Errorf("envelope %d: user %s was granted packet %d (repeat %v) by a grab sent %s after redis was killed (back %s after the kill)",
				e.Env, e.User, e.Packet, e.Repeat, e.Sent.Sub(killed).Round(time.Millisecond), back.Sub(killed).Round(time.Millisecond))
		}
	}
}

// assertSuspendedRefuse fails the test unless each envelope of ids carries a
// suspend reason and a new user's grab of it answers 503 unavailable.
func assertSuspendedRefuse(t *testing.T, s *faultStack, db *pgx.Conn, c *http.Client, ids []int64) {
	t.Helper()
	for _, id := range ids {
		r := readEnvelopeState(t, db, id)
		if r.SuspendReason == "" {
			t.Errorf("envelope %d suspended without a reason", id)
		}
		if e := grabOnce(c, s.base, id, fmt.Sprintf("late-%d", id)); e.Status != 503 || e.Code != "unavailable" {
			t.Errorf("grab of suspended envelope %d: %s, want 503 unavailable", id, e.key())
		}
	}
}

// recoverByRefund refunds the suspended envelope refundID with `flusher
// recover`: the dry run prints the plan and changes nothing; the refund
// settles it, counts in the flusher's metrics, and new users' grabs then
// answer 409 expired.
func recoverByRefund(t *testing.T, s *faultStack, db *pgx.Conn, c *http.Client, refundID int64) {
	t.Helper()
	refundedBefore := flusherMetric(t, s, "redpacket_refunded_cents_total")
	before := readEnvelopeState(t, db, refundID)
	code, out := run(t, "flusher", s.env, "recover", "-envelope", fmt.Sprint(refundID), "-action", "refund", "-dry-run")
	if code != 0 || !strings.Contains(out, "refund: refund the") || !strings.Contains(out, "dry run: nothing changed") {
		t.Errorf("recover -action refund -dry-run: exit %d:\n%s", code, out)
	}
	if after := readEnvelopeState(t, db, refundID); after != before {
		t.Errorf("dry run changed envelope %d: %+v -> %+v", refundID, before, after)
	}
	code, out = run(t, "flusher", s.env, "recover", "-envelope", fmt.Sprint(refundID), "-action", "refund")
	if code != 0 || !strings.Contains(out, "is settled") {
		t.Errorf("recover -action refund: exit %d:\n%s", code, out)
	}
	r := readEnvelopeState(t, db, refundID)
	if r.Status != "settled" || !r.Settled || r.ClaimedCents+r.RefundedCents != r.TotalCents ||
		r.ClaimedCents != before.ClaimedCents || r.RefundedCount != r.Count-r.ClaimedCount || r.UnclaimedCount != 0 {
		t.Errorf("envelope %d after refund: %+v (before %+v)", refundID, r, before)
	}
	// The refund, made by a process of its own, counts in the flusher's
	// metrics like any settlement.
	if got := flusherMetric(t, s, "redpacket_refunded_cents_total") - refundedBefore; got != float64(r.RefundedCents) {
		t.Errorf("redpacket_refunded_cents_total rose by %v after recover -action refund, want %d", got, r.RefundedCents)
	}
	if got := flusherMetric(t, s, `redpacket_envelopes_finished_total{status="settled"}`); got < 1 {
		t.Errorf(`redpacket_envelopes_finished_total{status="settled"} = %v after the refund`, got)
	}
	if e := grabOnce(c, s.base, refundID, "after-refund"); e.Status != 409 || e.Code != "expired" {
		t.Errorf("grab of refunded envelope %d by a new user: %s, want 409 expired", refundID, e.key())
	}
}

// recoverByReload reloads the suspended envelope reloadID with `flusher
// recover`: it reopens with what PostgreSQL shows; holders get their packet
// again, new users of a short load get new packets. It returns that load's
// log.
func recoverByReload(t *testing.T, s *faultStack, db *pgx.Conn, c *http.Client, reloadID int64) *loadLog {
	t.Helper()
	code, out := run(t, "flusher", s.env, "recover", "-envelope", fmt.Sprint(reloadID), "-action", "reload")
	if code != 0 || !strings.Contains(out, "is open") {
		t.Fatalf("recover -action reload: exit %d:\n%s", code, out)
	}
	holders := heldClaims(t, db, reloadID, 20)
	for user, p := range holders {
		e := grabOnce(c, s.base, reloadID, user)
		if e.Status != 200 || !e.Repeat || e.Packet != p.packet || e.Amount != p.amount {
			t.Errorf("holder %s of packet %d regrabbed reloaded envelope %d: %s packet %d", user, p.packet, reloadID, e.key(), e.Packet)
		}
	}
	reload := startLoad(t, s.base, []int64{reloadID}, loadSpec{Workers: 4, For: 2 * time.Second, Max: 400, Pace: 2 * time.Millisecond, Tag: "r"})
	rlog := reload.wait()
	rlog.resolve(s.base, 5*time.Second)
	t.Logf("after reload: %s", rlog.summary())
	if rlog.counts()["200"] == 0 {
		t.Errorf("no new user got a packet of reloaded envelope %d", reloadID)
	}
	return rlog
}

// flusherMetric reads one series of the flusher's /metrics.
func flusherMetric(t *testing.T, s *faultStack, series string) float64 {
	t.Helper()
	v, ok := metricValue(scrape(t, s.flusherURL+"/metrics"), series)
	if !ok {
		t.Fatalf("the flusher's /metrics lacks %s", series)
	}
	return v
}

// heldClaims returns up to n users holding a packet of the envelope in
// PostgreSQL, with their packets.
func heldClaims(t *testing.T, db *pgx.Conn, id int64, n int) map[string]claimRow {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT claimed_by, id, amount_cents FROM packets
		WHERE envelope_id = $1 AND claimed_by IS NOT NULL ORDER BY id LIMIT $2`, id, n)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]claimRow{}
	var user string
	var c claimRow
	if _, err := pgx.ForEachRow(rows, []any{&user, &c.packet, &c.amount}, func() error {
		out[user] = c
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
