package retention

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"redpacket/internal/pgstore"
	"redpacket/internal/testenv"
)

// A run archives and deletes the settled envelopes older than the
// retention, every row of each, and leaves open and recently settled ones
// alone; the manifest's rows and cents are those deleted, and a second run
// finds nothing.
func TestRunRemovesOnlyOldSettledEnvelopes(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	var want int64
	for id := int64(1); id <= 5; id++ {
		want += seed(t, pool, id, 10, "settled", now.Add(-48*time.Hour))
	}
	seed(t, pool, 6, 10, "settled", now.Add(-time.Hour))
	seed(t, pool, 7, 10, "open", now.Add(-72*time.Hour))
	before := count(t, pool, 6, 7)
	o := options(t, 24*time.Hour)
	res, err := Run(t.Context(), pool, o)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Removed; r.Envelopes != 5 || r.Packets != 50 || r.TotalCents != want || r.ClaimedCents+r.RefundedCents != want ||
		r.Events != 30 || r.Conflicts != 5 || r.Recipients != 5 || r.Commitments != 5 || res.Batches != 3 {
		t.Errorf("removed %+v in %d batches; want 5 envelopes, 50 packets, %d cents", r, res.Batches, want)
	}
	for name, n := range count(t, pool, 1, 2, 3, 4, 5) {
		if n != 0 {
			t.Errorf("%s still holds %d rows of the old settled envelopes", name, n)
		}
	}
	if after := count(t, pool, 6, 7); !equalCounts(after, before) {
		t.Errorf("the recent and the open envelope changed: %v, was %v", after, before)
	}
	m := manifestOf(t, res.Set)
	if !m.Complete || m.Envelopes != 5 || m.Tables[1].Rows != 50 || m.Tables[0].Sums["total_cents"] != want ||
		m.Tables[1].Sums["amount_cents"] != want || m.Tables[1].Sums["claimed_cents"] != res.Removed.ClaimedCents {
		t.Errorf("manifest %+v does not match what was removed, %+v", m, res.Removed)
	}
	again, err := Run(t.Context(), pool, o)
	if err != nil || again.Removed.Envelopes != 0 || again.Set != "" || len(sets(t, o.Dir)) != 1 {
		t.Errorf("second run: %+v, %v; sets %v", again, err, sets(t, o.Dir))
	}
}

func equalCounts(a, b map[string]int64) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}

func manifestOf(t testing.TB, set string) Manifest {
	t.Helper()
	var m Manifest
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(set, manifestName))), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A dry run counts what a run would remove and changes nothing, on disk
// either; -limit bounds both.
func TestDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	var want int64
	for id := int64(1); id <= 3; id++ {
		total := seed(t, pool, id, 4, "settled", now.Add(-time.Duration(10-id)*time.Hour))
		if id <= 2 {
			want += total
		}
	}
	before := count(t, pool, 1, 2, 3)
	o := options(t, time.Hour)
	o.DryRun, o.Limit = true, 2
	res, err := Run(t.Context(), pool, o)
	if err != nil || res.Removed.Envelopes != 2 || res.Removed.Packets != 8 || res.Removed.TotalCents != want || res.Set != "" {
		t.Errorf("dry run: %+v, %v; want 2 envelopes, 8 packets, %d cents", res, err, want)
	}
	if after := count(t, pool, 1, 2, 3); !equalCounts(after, before) || len(sets(t, o.Dir)) != 0 {
		t.Errorf("the dry run changed something: %v, was %v; sets %v", after, before, sets(t, o.Dir))
	}
	o.DryRun = false
	if res, err := Run(t.Context(), pool, o); err != nil || res.Removed.Envelopes != 2 || count(t, pool, 3)["packets"] != 4 {
		t.Errorf("a run of -limit 2: %+v, %v", res, err)
	}
}

// A failure while the archive is written deletes nothing of its batch, and
// the set holds only the batches that were deleted.
func TestArchiveFailureDeletesNothing(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	for id := int64(1); id <= 4; id++ {
		seed(t, pool, id, 10, "settled", now.Add(-48*time.Hour).Add(time.Duration(id)*time.Second))
	}
	o := options(t, 24*time.Hour)
	// A batch writes about 1,000 bytes of packets: the second fails.
	o.failAt = map[string]int64{"packets": 1500}
	res, err := Run(t.Context(), pool, o)
	if !errors.Is(err, errInjected) || res.Removed.Envelopes != 2 {
		t.Fatalf("run with a failing disk: %+v, %v; want the first batch removed, then the failure", res, err)
	}
	if got := count(t, pool, 3, 4); got["envelopes"] != 2 || got["packets"] != 20 || got["events"] != 12 {
		t.Errorf("the failed batch deleted rows: %v left", got)
	}
	m := manifestOf(t, res.Set)
	lines := strings.Count(readFile(t, filepath.Join(res.Set, "packets.tsv")), "\n")
	if m.Complete || m.Envelopes != 2 || m.Tables[1].Rows != 20 || lines != 20 {
		t.Errorf("the set of the failed run: %+v, %d packet lines; want the first batch alone", m, lines)
	}
	// The failed batch's locks went with its rollback, not later with a
	// connection closed mid-COPY.
	if _, err := pool.Exec(t.Context(), `SELECT id FROM envelopes WHERE id IN (3, 4) FOR UPDATE NOWAIT`); err != nil {
		t.Errorf("the failed batch still locks its envelopes: %v", err)
	}
	o.failAt = nil
	if res, err := Run(t.Context(), pool, o); err != nil || res.Removed.Envelopes != 2 {
		t.Errorf("the run after: %+v, %v", res, err)
	}
}

// An archive directory that does not exist is refused before anything is
// read, not created.
func TestRunRefusesMissingArchiveDir(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	seed(t, pool, 1, 2, "settled", now.Add(-48*time.Hour))
	o := options(t, 24*time.Hour)
	o.Dir = filepath.Join(o.Dir, "typo")
	if _, err := Run(t.Context(), pool, o); err == nil || count(t, pool, 1)["packets"] != 2 {
		t.Errorf("a missing archive directory: %v", err)
	}
}

// With a webhook, an envelope stays while the receiver has not accepted
// one of its events, and goes once it has.
func TestDeliveredOnlyWaitsForTheWebhook(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	seed(t, pool, 1, 4, "settled", now.Add(-48*time.Hour))
	seed(t, pool, 2, 4, "settled", now.Add(-48*time.Hour))
	exec(t, pool, `UPDATE events SET delivered_at = $1 WHERE envelope_id = 2`, now)
	o := options(t, 24*time.Hour)
	o.DeliveredOnly = true
	res, err := Run(t.Context(), pool, o)
	if err != nil || res.Removed.Envelopes != 1 || count(t, pool, 1)["events"] != 3 || count(t, pool, 2)["envelopes"] != 0 {
		t.Errorf("run: %+v, %v; want envelope 2 removed and envelope 1, with undelivered events, kept", res, err)
	}
}

// A run without the webhook settings (a cron job's environment) keeps the
// envelopes whose events wait for the receiver all the same once the
// flushers recorded that they send webhooks; one that records they do not
// lets them go.
func TestRecordedWebhooksKeepUndeliveredEnvelopes(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	seed(t, pool, 1, 4, "settled", now.Add(-48*time.Hour))
	pg := pgstore.New(pool)
	if changed, err := pg.RecordWebhooks(t.Context(), true); err != nil || changed {
		t.Fatalf("first record of webhooks on: changed %v, %v; want nothing recorded before", changed, err)
	}
	o := options(t, 24*time.Hour) // DeliveredOnly false, as without WEBHOOK_URL
	for _, dry := range []bool{true, false} {
		o.DryRun = dry
		res, err := Run(t.Context(), pool, o)
		if err != nil || res.Removed.Envelopes != 0 || !res.KeptUndelivered || count(t, pool, 1)["envelopes"] != 1 {
			t.Fatalf("run (dry %v) with webhooks recorded: %+v, %v; want envelope 1, undelivered, kept", dry, res, err)
		}
	}
	if changed, err := pg.RecordWebhooks(t.Context(), false); err != nil || !changed {
		t.Fatalf("webhooks recorded off after on: changed %v, %v; want changed", changed, err)
	}
	if changed, err := pg.RecordWebhooks(t.Context(), false); err != nil || changed {
		t.Fatalf("webhooks recorded off again: changed %v, %v; want unchanged", changed, err)
	}
	if res, err := Run(t.Context(), pool, o); err != nil || res.Removed.Envelopes != 1 || res.KeptUndelivered {
		t.Errorf("run with webhooks recorded off: %+v, %v; want envelope 1 removed", res, err)
	}
}

// A run below the EVENTS_RETENTION the flushers recorded (a cron job's
// environment without it) is refused, removing nothing: an envelope's
// removal deletes its events, which feed readers are promised that long.
func TestRecordedEventsRetentionBoundsTheAge(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	seed(t, pool, 1, 4, "settled", now.Add(-10*24*time.Hour))
	pg := pgstore.New(pool)
	if before, err := pg.RecordEventsRetention(t.Context(), 30*24*time.Hour); err != nil || before != 0 {
		t.Fatalf("first record of EVENTS_RETENTION: before %v, %v; want none", before, err)
	}
	for _, dry := range []bool{true, false} {
		o := options(t, 7*24*time.Hour)
		o.DryRun = dry
		if res, err := Run(t.Context(), pool, o); !errors.Is(err, ErrShorterThanEvents) || res.Removed.Envelopes != 0 {
			t.Fatalf("run (dry %v) of 7 days under a recorded 30: %+v, %v; want ErrShorterThanEvents", dry, res, err)
		}
	}
	if count(t, pool, 1)["envelopes"] != 1 {
		t.Fatal("the envelope was removed by a refused run")
	}
	if before, err := pg.RecordEventsRetention(t.Context(), 7*24*time.Hour); err != nil || before != 30*24*time.Hour {
		t.Fatalf("EVENTS_RETENTION recorded anew: before %v, %v; want the 30 days recorded first", before, err)
	}
	if res, err := Run(t.Context(), pool, options(t, 7*24*time.Hour)); err != nil || res.Removed.Envelopes != 1 {
		t.Errorf("run of 7 days under a recorded 7: %+v, %v; want envelope 1 removed", res, err)
	}
}

// The claim events of runs hold an envelope back the same way: it stays
// while its run is not delivered to its last event, and goes once it is.
func TestDeliveredOnlyWaitsForClaimRuns(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	seed(t, pool, 1, 4, "settled", now.Add(-48*time.Hour))
	asRun(t, pool, 1) // its 2 claim events, undelivered; its settled event is delivered
	exec(t, pool, `UPDATE claim_event_runs SET delivered_through = first_position, delivered_at = $1`, now)
	o := options(t, 24*time.Hour)
	o.DeliveredOnly = true
	if res, err := Run(t.Context(), pool, o); err != nil || res.Removed.Envelopes != 0 {
		t.Fatalf("run: %+v, %v; want envelope 1, its run half delivered, kept", res, err)
	}
	exec(t, pool, `UPDATE claim_event_runs SET delivered_through = last_position`)
	res, err := Run(t.Context(), pool, o)
	if err != nil || res.Removed.Envelopes != 1 || res.Removed.Events != 3 {
		t.Errorf("run: %+v, %v; want envelope 1 removed with its 2 claim events and its settled event", res, err)
	}
	var runs int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM claim_event_runs`).Scan(&runs); err != nil || runs != 0 {
		t.Errorf("%d runs left, %v", runs, err)
	}
}

// An envelope given up while loading (failed: nothing offered, everything
// refunded) is final too: it is archived and removed with the settled ones
// once its settlement is older than the retention, and a recent one stays.
func TestRunRemovesOldFailedEnvelopes(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	want := seed(t, pool, 1, 4, "failed", now.Add(-48*time.Hour))
	want += seed(t, pool, 2, 10, "settled", now.Add(-48*time.Hour))
	seed(t, pool, 3, 4, "failed", now.Add(-time.Hour))
	before := count(t, pool, 3)
	res, err := Run(t.Context(), pool, options(t, 24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Removed; r.Envelopes != 2 || r.Packets != 14 || r.TotalCents != want || r.ClaimedCents+r.RefundedCents != want {
		t.Errorf("removed %+v; want the old failed and settled envelopes, 14 packets, %d cents", r, want)
	}
	for name, n := range count(t, pool, 1, 2) {
		if n != 0 {
			t.Errorf("%s still holds %d rows of the old envelopes", name, n)
		}
	}
	if after := count(t, pool, 3); !equalCounts(after, before) {
		t.Errorf("the recently failed envelope changed: %v, was %v", after, before)
	}
}

// An envelope whose money does not add up is not deleted: a claims row with
// no packet of its envelope, or with another amount than its packet's, is
// in no file, so deleting it would leave the archive the only record of a
// ledger that was wrong. It stays, the run goes on past it and names it.
func TestUnbalancedEnvelopeStaysAndTheRestGo(t *testing.T) {
	t.Parallel()
	for name, stray := range map[string]string{
		"a claim without its packet": `INSERT INTO claims (envelope_id, packet_id, user_id, amount_cents, claimed_at)
			VALUES (2, 999, 'stray', 5, now())`,
		"a claim of another amount": `UPDATE claims SET amount_cents = amount_cents + 1 WHERE envelope_id = 2 AND packet_id = 200001`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool, _ := testenv.Postgres(t)
			for id := int64(1); id <= 3; id++ {
				seed(t, pool, id, 10, "settled", now.Add(-48*time.Hour).Add(time.Duration(id)*time.Second))
			}
			exec(t, pool, stray)
			before := count(t, pool, 2)
			res, err := Run(t.Context(), pool, options(t, 24*time.Hour)) // batches of 2
			if !errors.Is(err, ErrUnbalanced) || !slices.Equal(res.Unbalanced, []int64{2}) || res.Removed.Envelopes != 2 {
				t.Fatalf("run: %+v, %v; want envelopes 1 and 3 removed, 2 named unbalanced", res, err)
			}
			if after := count(t, pool, 2); !equalCounts(before, after) {
				t.Errorf("rows of the unbalanced envelope deleted: %v before, %v after", before, after)
			}
			if left := count(t, pool, 1, 3); left["envelopes"] != 0 || left["packets"] != 0 {
				t.Errorf("balanced envelopes left: %v", left)
			}
		})
	}
}

// A run that removes nothing, its only envelope unbalanced, leaves no file
// set behind.
func TestRunOfNothingLeavesNoSet(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	seed(t, pool, 2, 10, "settled", now.Add(-48*time.Hour))
	exec(t, pool, `UPDATE claims SET amount_cents = amount_cents + 1 WHERE envelope_id = 2 AND packet_id = 200001`)
	o := options(t, 24*time.Hour)
	res, err := Run(t.Context(), pool, o)
	if !errors.Is(err, ErrUnbalanced) || res.Set != "" {
		t.Fatalf("run: %+v, %v; want ErrUnbalanced and no set", res, err)
	}
	if entries, err := os.ReadDir(o.Dir); err != nil || len(entries) != 0 {
		t.Errorf("the archive directory holds %v, %v; want nothing", entries, err)
	}
}

// An envelope one of whose idempotency keys is live with no answer
// recorded (its create answered 503, its envelope opened by the repair) is
// kept until the key expires: a repeat of the create rebuilds its answer
// from the envelope. A key whose answer was recorded, or that expired, keeps
// nothing. The dry run counts the same.
func TestUnansweredIdempotencyKeyKeepsItsEnvelope(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	for id := int64(1); id <= 3; id++ {
		seed(t, pool, id, 4, "settled", now.Add(-48*time.Hour))
	}
	exec(t, pool, `INSERT INTO idempotency_keys (client_name, idem_key, request_sha256, envelope_id, created_at,
            expires_at, response_status, response_body)
        VALUES ('', 'unanswered', sha256('a'), 1, $1::timestamptz - interval '49 hours', $1::timestamptz + interval '1 hour', NULL, NULL),
               ('', 'answered', sha256('b'), 2, $1::timestamptz - interval '49 hours', $1::timestamptz + interval '1 hour', 201, '{}'),
               ('', 'expired', sha256('c'), 3, $1::timestamptz - interval '49 hours', $1::timestamptz - interval '1 hour', NULL, NULL)`, now)
	o := options(t, 24*time.Hour)
	o.DryRun = true
	if res, err := Run(t.Context(), pool, o); err != nil || res.Removed.Envelopes != 2 {
		t.Errorf("dry run: %+v, %v; want 2 envelopes", res.Removed, err)
	}
	o.DryRun = false
	res, err := Run(t.Context(), pool, o)
	if err != nil || res.Removed.Envelopes != 2 || count(t, pool, 1)["envelopes"] != 1 {
		t.Errorf("run: %+v, %v; want envelopes 2 and 3 removed, 1 kept for its unanswered key", res.Removed, err)
	}
}

// A DBA's statement_timeout shorter than a batch takes does not stop
// retention (every batch failed the same way each hour, and the ledger
// grew): a batch lifts the limit for its transaction.
func TestRunOutlastsTheDatabasesStatementTimeout(t *testing.T) {
	t.Parallel()
	pool, url := testenv.Postgres(t)
	for id := int64(1); id <= 3; id++ {
		seed(t, pool, id, 4, "settled", now.Add(-48*time.Hour))
	}
	// Deletes that take longer than the limit.
	exec(t, pool, `CREATE FUNCTION test_slow_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(2); RETURN NULL; END $$`)
	exec(t, pool, `CREATE TRIGGER test_slow_delete AFTER DELETE ON packet_pool FOR EACH STATEMENT EXECUTE FUNCTION test_slow_delete()`)
	limited := testenv.LimitedPool(t, pool, url, "statement_timeout", "1s")
	res, err := Run(t.Context(), limited, options(t, 24*time.Hour))
	if err != nil || res.Removed.Envelopes != 3 {
		t.Errorf("run under a 1 s statement_timeout: %+v, %v; want 3 envelopes removed", res.Removed, err)
	}
}
