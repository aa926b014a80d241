package e2e_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"redpacket/internal/testenv"
)

// The flusher is SIGKILLed every 200-500 ms under a grab load and restarted at
// once, wherever it is: starting, taking a batch, writing it, settling a
// sold-out envelope. The last one runs normally: PostgreSQL then holds every
// grab answered, exactly once, no claim conflicts, and the audit passes. The
// grabber, which does not need the flusher, answers every grab throughout.
func TestFaultFlusherKillLoop(t *testing.T) {
	t.Parallel()
	dbURL := testenv.PostgresURL(t)
	_, prefix := testenv.Redis(t)
	s := startStack(t, dbURL, testenv.RedisURL(t), prefix)
	// Small envelopes sell out (and settle) during the kills, large ones stay open.
	_, ids := s.createEnvelopes(t, 3600, 300, 800, 1500, 3000, 5000)

	const loadFor = 6 * time.Second
	load := startLoad(t, s.base, ids, loadSpec{Workers: 8, For: loadFor, Max: 40000, Pace: 2 * time.Millisecond, Tag: "k"})
	end := time.Now().Add(loadFor)
	kills := 0
	for kills < 60 && time.Now().Before(end) {
		// The fault schedule: a random moment in the flusher's work.
		time.Sleep(200*time.Millisecond + rand.N(300*time.Millisecond))
		killAndReap(t, s.flusher)
		s.flusher = start(t, "flusher", s.env)
		kills++
	}
	log := load.wait()
	t.Logf("flusher SIGKILLed %d times; load: %s", kills, log.summary())

	for k, n := range log.counts() {
		// A sold-out envelope the flusher has settled answers expired.
		if k != "200" && k != "409 sold_out" && k != "409 expired" {
			t.Errorf("%d grabs answered %s while only the flusher was killed", n, k)
		}
	}
	if log.counts()["200"] == 0 {
		t.Fatal("no grab was answered 200")
	}
	db := connectTestDB(t, dbURL)
	var inPG int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM packets WHERE envelope_id = ANY($1) AND claimed_by IS NOT NULL`,
		ids).Scan(&inPG); err != nil {
		t.Fatal(err)
	}
	t.Logf("when the kills stopped, postgres held %d of the %d grabs answered", inPG, log.counts()["200"])
	waitReady(t, s.flusherURL+"/readyz")
	// The wait is generous: the flushers killed in the loop may have written
	// little, and the last one catches up on a busy machine.
	assertLedger(t, s, ledgerSpec{Envelopes: ids, Logs: []*loadLog{log}, Wait: 30 * time.Second})
	assertNoConflicts(t, db)
	t.Logf("envelopes by status: %v", envelopeStatusCounts(t, db, ids))
	s.stop(t)
}
