package audit

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// cleanSet writes one consistent envelope of every kind from id on, and
// returns the number of envelopes and packets written and the suspended one.
func (d *db) cleanSet(id int64) (envelopes int, packets int64, suspended int64) {
	d.t.Helper()
	now := time.Now()
	d.settled(id, now, 2, 100, 250, 50, 600) // some claimed, rest refunded
	d.settled(id+1, now, 0, 300, 200)        // nobody grabbed
	d.soldOut(id+2, now, 10, 20, 30)
	d.live(id+3, "open", 3, 2, 100, 100, 100, 97) // one grab not flushed yet
	d.live(id+4, "expired", 4, 4, 5, 6, 7, 8, 9)
	d.failed(id+5, now, 400, 600)
	d.insert(id+6, "loading", now, 1, 2, 3)  // not in Redis yet
	d.insert(id+7, "suspended", now, 50, 50) // Redis lost it
	d.live(id+8, "open", 0, 0, 1000)         // nobody grabbed yet
	return 9, 4 + 2 + 3 + 4 + 5 + 2 + 3 + 2 + 1, id + 7
}

func TestCleanDatabasePasses(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	n, packets, suspended := d.cleanSet(1001)
	for _, withRedis := range []bool{true, false} {
		var rep Report
		if withRedis {
			rep = d.run(Options{})
		} else {
			rep = d.runPG(Options{})
		}
		if !rep.OK() || rep.Checked != n || rep.Packets != packets || rep.Conflicts != 0 ||
			!slices.Equal(rep.Suspended, []int64{suspended}) {
			t.Errorf("redis %v: report %+v, want OK, %d envelopes, %d packets, suspended [%d]",
				withRedis, rep, n, packets, suspended)
		}
	}
}

func TestCorruptionsAreDetected(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	now := time.Now()
	_, _, suspended := d.cleanSet(1001)

	corruptSums(d, now)
	corruptStatuses(d, now)
	corruptRedis(t, d)

	// A settled envelope with a claim conflict recorded against it.
	d.settled(2014, now, 1, 100, 200, 300)
	d.conflict(2014, packet(2014, 0), "someone-else", now)

	rep := d.run(Options{})
	assertViolations(t, rep, map[int64][]string{
		2001: {CheckPacketSum},
		2002: {CheckPacketCount, CheckPacketSum},
		2003: {CheckClaimedCents},
		2004: {CheckRefundedCents, CheckClaimedPlusRefund},
		2005: {CheckRefundedCents, CheckUnaccounted},
		2006: {CheckSettledAt},
		2007: {CheckSoldOutStatus},
		2008: {CheckSoldOutStatus},
		2009: {CheckFailedClaimed},
		2010: {CheckRedisMissing},
		2011: {CheckRedisBehind},
		2012: {CheckRedisPool},
		2013: {CheckRedisMeta},
		2014: {CheckConflict},
	})
	if rep.Conflicts != 1 || !slices.Equal(rep.Suspended, []int64{suspended}) {
		t.Errorf("conflicts %d, suspended %v; want 1, [%d]", rep.Conflicts, rep.Suspended, suspended)
	}
}

// corruptSums writes envelopes 2001-2006, each with one sum or count
// broken in PostgreSQL.
func corruptSums(d *db, now time.Time) {
	d.t.Helper()
	d.live(2001, "open", 0, 0, 100, 200, 300)
	d.exec(`UPDATE packets SET amount_cents = amount_cents + 1 WHERE id = $1`, packet(2001, 0))

	d.insert(2002, "loading", now, 100, 200, 300)
	d.exec(`DELETE FROM packets WHERE id = $1`, packet(2002, 2))

	d.live(2003, "open", 2, 2, 100, 200, 300)
	d.exec(`UPDATE envelopes SET claimed_cents = claimed_cents - 1 WHERE id = 2003`)

	d.settled(2004, now, 1, 100, 200, 300)
	d.exec(`UPDATE envelopes SET refunded_cents = refunded_cents - 1 WHERE id = 2004`)

	d.settled(2005, now, 1, 100, 200, 300)
	d.exec(`UPDATE packets SET refunded_at = NULL WHERE id = $1`, packet(2005, 2))

	d.settled(2006, now, 1, 100, 200, 300)
	d.exec(`UPDATE envelopes SET settled_at = NULL WHERE id = 2006`)
}

// corruptStatuses writes envelopes 2007-2009, each with a status that its
// claims contradict.
func corruptStatuses(d *db, now time.Time) {
	d.t.Helper()
	d.live(2007, "open", 3, 3, 100, 200, 300) // all claimed, never marked sold_out

	d.insert(2008, "open", now, 100, 200, 300)
	d.claimFirst(2008, 2)
	d.setStatus(2008, "sold_out")

	d.insert(2009, "loading", now, 100, 200, 300)
	d.claimFirst(2009, 1)
	d.settle(2009, "failed")
}

// corruptRedis writes envelopes 2010-2013, each with Redis's copy lost,
// behind, or garbled.
func corruptRedis(t *testing.T, d *db) {
	t.Helper()
	d.live(2010, "open", 1, 1, 100, 200, 300)
	if err := d.rdb.Del(d.ctx, d.keys.Meta(2010)).Err(); err != nil {
		t.Fatal(err)
	}

	d.live(2011, "expired", 1, 1, 100, 200, 300)
	if err := d.rdb.HSet(d.ctx, d.keys.Meta(2011), "grabbed_cents", 0).Err(); err != nil {
		t.Fatal(err)
	}

	d.live(2012, "open", 1, 0, 100, 200, 300)
	if err := d.rdb.LPop(d.ctx, d.keys.Pool(2012)).Err(); err != nil {
		t.Fatal(err)
	}

	d.live(2013, "open", 0, 0, 100, 200, 300)
	if err := d.rdb.HSet(d.ctx, d.keys.Meta(2013), "grabbed_cents", "lost").Err(); err != nil {
		t.Fatal(err)
	}
}

// TestConstraintViolationsReachTheChecks writes, in this test's own database,
// past the constraints that keep a packet from being claimed and refunded, a user
// from holding two packets of one envelope and claimed + refunded from
// exceeding the total, so the query's aggregates for them are tested too, not
// only the pure checks.
func TestConstraintViolationsReachTheChecks(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	now := time.Now()
	// Claimed and refunded: packet_pool has no constraint against it (the
	// writers and the packets view's trigger keep it), so it is written
	// to the table directly.
	d.exec(`ALTER TABLE claims DROP CONSTRAINT claims_user_envelope_key`)
	d.exec(`CREATE INDEX claims_user_envelope_key ON claims (user_id, envelope_id)`)
	d.exec(`ALTER TABLE envelopes DROP CONSTRAINT envelopes_check1`)

	d.settled(3001, now, 1, 100, 200, 300)
	d.exec(`UPDATE packet_pool SET refunded_at = now() WHERE id = $1`, packet(3001, 0))
	d.exec(`UPDATE envelopes SET refunded_cents = refunded_cents + 100 WHERE id = 3001`)

	d.insert(3002, "expired", now, 100, 200, 300)
	d.claim(3002, packet(3002, 0), "twice")
	d.claim(3002, packet(3002, 1), "twice")

	rep := d.runPG(Options{})
	assertViolations(t, rep, map[int64][]string{
		3001: {CheckClaimedAndRefunded, CheckClaimedPlusRefund},
		3002: {CheckUserTwice},
	})
}

// The window is the envelopes created or settled in it, plus every
// unfinished one.
func TestSinceSkipsOldFinalEnvelopesOnly(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	now := time.Now()
	old := now.Add(-30 * 24 * time.Hour)
	d.settled(4001, old, 1, 100, 200)
	d.failed(4002, old, 100, 200)
	d.settled(4003, now, 1, 100, 200)
	d.failed(4004, now, 100, 200)
	d.insert(4005, "loading", old, 100, 200)
	d.insert(4006, "open", old, 100, 200)
	d.soldOut(4007, old, 100, 200)
	d.insert(4008, "expired", old, 100, 200)
	d.insert(4009, "suspended", old, 100, 200)
	d.settled(4010, old, 1, 100, 200) // created long ago, settled now: checked
	d.exec(`UPDATE envelopes SET settled_at = $1 WHERE id IN (4001, 4002)`, old)
	// Every envelope breaks packet_sum, so the violations name the ones checked.
	d.exec(`UPDATE packets SET amount_cents = amount_cents + 1 WHERE id % 100 = 0`)
	d.conflict(4001, packet(4001, 0), "x", old)
	d.conflict(4003, packet(4003, 0), "x", now)

	rep := d.runPG(Options{Since: now.Add(-24 * time.Hour)})
	inWindow := map[int64][]string{4003: {CheckPacketSum, CheckConflict}}
	for _, id := range []int64{4004, 4005, 4006, 4007, 4008, 4009} {
		inWindow[id] = []string{CheckPacketSum}
	}
	inWindow[4004] = append(inWindow[4004], CheckRefundedCents) // refunded packet 0 grew
	inWindow[4003] = append(inWindow[4003], CheckClaimedCents)  // packet 0 is claimed
	inWindow[4007] = append(inWindow[4007], CheckClaimedCents)
	inWindow[4010] = []string{CheckPacketSum, CheckClaimedCents}
	assertViolations(t, rep, inWindow)
	if rep.Checked != 8 || rep.Conflicts != 1 {
		t.Errorf("since a day ago: checked %d, conflicts %d; want 8, 1", rep.Checked, rep.Conflicts)
	}

	all := d.runPG(Options{})
	if all.Checked != 10 || all.Conflicts != 2 {
		t.Errorf("everything: checked %d, conflicts %d; want 10, 2", all.Checked, all.Conflicts)
	}
}

func TestPagesCoverEveryEnvelope(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	n, packets, _ := d.cleanSet(5001)
	d.live(5100, "open", 1, 1, 10, 20)
	if err := d.rdb.Del(d.ctx, d.keys.Meta(5100)).Err(); err != nil {
		t.Fatal(err)
	}
	d.insert(5101, "loading", time.Now(), 10, 20)
	d.exec(`UPDATE packets SET amount_cents = 1 WHERE envelope_id IN (5001, 5101)`)
	n, packets = n+2, packets+4
	whole := d.run(Options{})
	if whole.Checked != n || whole.Packets != packets || len(whole.Violations) < 4 {
		t.Fatalf("one page: %+v", whole)
	}
	for _, size := range []int{1, 2, 3, n - 1, n, n + 1} {
		rep := d.run(Options{PageSize: size})
		if rep.Checked != whole.Checked || rep.Packets != whole.Packets ||
			!slices.Equal(rep.Violations, whole.Violations) || !slices.Equal(rep.Suspended, whole.Suspended) {
			t.Errorf("page size %d: %+v\nwant %+v", size, rep, whole)
		}
	}
}

func TestRunRefusesRedisWithoutKeys(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	if _, err := Run(d.ctx, d.pool, Options{Redis: d.rdb}); err == nil {
		t.Error("Run with Redis and no key builder succeeded")
	}
	ctx, cancel := context.WithCancel(d.ctx)
	cancel()
	if _, err := Run(ctx, d.pool, Options{Redis: d.rdb, Keys: redisstore.NewKeys("x", shards)}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run on a cancelled context = %v, want context.Canceled", err)
	}
}

// A claims row the packets view cannot show as written (its packet is not
// the envelope's, or its amount is not the packet's) is reported: the view
// would hide the first, and the reads of claims would show users the second.
func TestStrayClaimsReachTheChecks(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	now := time.Now()
	d.insert(4001, "expired", now, 100, 200, 300)
	d.claim(4001, packet(4001, 0), "fine")
	d.exec(`UPDATE claims SET amount_cents = amount_cents + 1 WHERE packet_id = $1`, packet(4001, 0))
	d.insert(4002, "expired", now, 100, 200, 300)
	d.exec(`INSERT INTO claims (envelope_id, packet_id, user_id, amount_cents, claimed_at) VALUES (4002, 999999, 'ghost', 100, now())`)
	d.insert(4003, "expired", now, 100, 200, 300)
	d.claim(4003, packet(4003, 1), "clean")

	rep := d.runPG(Options{})
	assertViolations(t, rep, map[int64][]string{
		4001: {CheckStrayClaims},
		4002: {CheckStrayClaims},
	})
}

// Rows keyed by an envelope that does not exist (a repair that deleted the
// envelope alone) are reported, once per table and envelope: by -all
// wherever they are, by the window when their ids are the window's.
func TestOrphanRowsAreReported(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	now := time.Now()
	d.settled(6001, now.Add(-30*24*time.Hour), 1, 100, 200)
	d.settled(6003, now, 1, 100, 200)
	d.insert(6010, "open", now, 100)
	for _, gone := range []int64{6002, 6004} {
		d.exec(`INSERT INTO packets (id, envelope_id, amount_cents, claimed_by, claimed_at)
			VALUES ($1 * 1000 + 1, $1, 50, 'u', now()), ($1 * 1000 + 2, $1, 50, NULL, NULL)`, gone)
		d.exec(`INSERT INTO events (id, type, envelope_id, data) VALUES ($1 * 1000, 'envelope.settled', $1, '{}')`, gone)
		// A create that failed after writing its commitment leaves it: no orphan.
		d.exec(`INSERT INTO split_commitments (envelope_id, salt, commitment) VALUES ($1, repeat('0', 64), repeat('f', 64))`, gone)
	}
	orphans := []string{CheckOrphanRows, CheckOrphanRows, CheckOrphanRows} // packet_pool, claims, events
	all := d.runPG(Options{})
	assertViolations(t, all, map[int64][]string{6002: orphans, 6004: orphans})
	// The window starts at envelope 6003, created an hour ago: 6004 is after it.
	window := d.runPG(Options{Since: now.Add(-time.Hour)})
	assertViolations(t, window, map[int64][]string{6004: orphans})
}

// A DBA's statement_timeout set for the daemons' statements does not fail
// the audit: a page reads hundreds of envelopes with every packet, which the
// limit cut off at every run (the audit from cron failing for good); its
// reads lift it, bounded by the audit's own -timeout instead.
func TestAuditOutlastsTheDatabasesStatementTimeout(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	n, packets, _ := d.cleanSet(1001)
	// Envelopes of 200,000 packets each, whose page takes longer than the
	// limit.
	const big, each = 4, 200_000
	for id := int64(3001); id < 3001+big; id++ {
		d.exec(`INSERT INTO envelopes (id, shard, sender_id, total_cents, count, status, created_at, expires_at)
			VALUES ($1, $2, 'sender', $3, $4, 'expired', now(), now())`, id, id%shards, each, each)
		d.exec(`INSERT INTO packet_pool (id, envelope_id, amount_cents)
			SELECT $1::bigint * 1000000 + i, $1, 1 FROM generate_series(1, $2::int) AS i`, id, each)
	}
	d.exec(`ANALYZE`)
	limited := testenv.LimitedPool(t, d.pool, d.pool.Config().ConnString(), "statement_timeout", "100ms")
	rep, err := Run(d.ctx, limited, Options{})
	if err != nil {
		t.Fatalf("audit under a 100ms statement_timeout: %v", err)
	}
	if rep.Checked != n+big || rep.Packets != packets+big*each {
		t.Errorf("audit checked %d envelopes and %d packets, want %d and %d", rep.Checked, rep.Packets, n+big, packets+big*each)
	}
}
