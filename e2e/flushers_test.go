package e2e_test

import (
	"strings"
	"testing"
	"time"

	"redpacket/internal/testenv"
)

// Three flushers share the shards through their leases; one is SIGKILLed
// mid-load. The other two take its shards over within seconds: PostgreSQL
// ends up holding every grab answered, each exactly once, with no conflict.
func TestSeveralFlushersOneKilled(t *testing.T) {
	t.Parallel()
	dbURL := testenv.PostgresURL(t)
	_, prefix := testenv.Redis(t)
	s := startStack(t, dbURL, testenv.RedisURL(t), prefix)
	flushers := []*proc{s.flusher}
	for range 2 {
		addr := freeAddr(t)
		flushers = append(flushers, start(t, "flusher", append(s.env, "FLUSHER_ADDR="+addr)))
		waitReady(t, "http://"+addr+"/readyz")
	}
	// One envelope per shard, so every flusher has work.
	counts := make([]int, 16)
	for i := range counts {
		counts[i] = 1500
	}
	_, ids := s.createEnvelopes(t, 3600, counts...)
	load := startLoad(t, s.base, ids, loadSpec{Workers: 8, For: 5 * time.Second, Max: 30000, Pace: time.Millisecond, Tag: "f"})
	// The one killed must have been draining shards: wait until every
	// flusher holds some (on a busy machine the later ones join late).
	deadline := time.Now().Add(30 * time.Second)
	for !allHoldShards(flushers) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	killAndReap(t, flushers[1])
	log := load.wait()
	t.Logf("load: %s", log.summary())
	if log.counts()["200"] == 0 {
		t.Fatal("no grab was answered 200")
	}
	assertLedger(t, s, ledgerSpec{Envelopes: ids, Logs: []*loadLog{log}, Wait: 30 * time.Second})
	db := connectTestDB(t, dbURL)
	assertNoConflicts(t, db)
	s.grabber.stop(t)
	flushers[0].stop(t)
	flushers[2].stop(t)
	// Every flusher held shards (their output is complete once they exited).
	for i, f := range flushers {
		if !holdsShards(f) {
			t.Errorf("flusher %d never held a shard", i)
		}
	}
}

// holdsShards reports whether a flusher's log says it took shard leases.
func holdsShards(f *proc) bool { return strings.Contains(f.out.String(), leaseTaken) }

// leaseTaken is the message of the one line a flusher logs when a refresh
// of its leases took shards (with the shards it took and holds).
const leaseTaken = `"msg":"took shard leases"`

func allHoldShards(fs []*proc) bool {
	for _, f := range fs {
		if !holdsShards(f) {
			return false
		}
	}
	return true
}
