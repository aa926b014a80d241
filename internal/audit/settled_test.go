package audit

import (
	"strings"
	"testing"
	"time"

	"redpacket/internal/redisstore"
)

// TestSettledClaimsMatchRedis: for a settled envelope whose claims Redis
// still holds, every claim Redis answers must be one PostgreSQL paid, and
// the other way round. A grab Redis answered but PostgreSQL never received
// (the user is answered it again as a repeat, its packet was refunded), a
// claim Redis lost, and a claim held differently are each a violation;
// matching claims, and claims Redis no longer holds, are not.
func TestSettledClaimsMatchRedis(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	settle := func(id int64, grabs, flushed int) {
		t.Helper()
		d.live(id, "open", grabs, flushed, 100, 200, 300, 400)
		d.settle(id, "settled")
	}
	settle(6001, 3, 3) // all grabs paid: fine
	settle(6002, 3, 2) // one answered by Redis, refunded by PostgreSQL
	settle(6003, 2, 2)
	if err := d.rdb.HDel(d.ctx, d.keys.UserClaims(6003, 1, "u1"), "u1").Err(); err != nil { // Redis lost one
		t.Fatal(err)
	}
	settle(6004, 2, 2)
	if err := d.rdb.HSet(d.ctx, d.keys.UserClaims(6004, 1, "u0"), "u0", "1:1:1:1").Err(); err != nil { // held differently
		t.Fatal(err)
	}
	settle(6005, 2, 1) // the same as 6002, but its keys have expired
	if err := d.store.Forget(d.ctx, 6005, 4, time.Hour); err != nil {
		t.Fatal(err)
	}
	settle(6006, 2, 2) // PostgreSQL holds another order number
	d.exec(`UPDATE packets SET order_no = '209901010000000001' WHERE envelope_id = 6006 AND claimed_by = 'u0'`)
	settle(6007, 2, 2) // PostgreSQL holds none (applied without it): not compared
	d.exec(`UPDATE packets SET order_no = NULL WHERE envelope_id = 6007`)

	rep := d.run(Options{})
	assertViolations(t, rep, map[int64][]string{
		6002: {CheckRedisClaims},
		6003: {CheckRedisClaims},
		6004: {CheckRedisClaims},
		6006: {CheckRedisClaims},
	})
	for _, v := range rep.Violations {
		want := map[int64]string{6002: "1 answered by redis, not paid by postgres", 6003: "1 paid by postgres, unknown to redis",
			6004: "1 held differently", 6006: "1 held differently"}[v.EnvelopeID]
		if !strings.Contains(v.Detail, want) {
			t.Errorf("envelope %d: %q, want it to say %q", v.EnvelopeID, v.Detail, want)
		}
	}
	if pg := d.runPG(Options{}); !pg.OK() {
		t.Errorf("without Redis the envelopes are consistent, yet: %+v", pg.Violations)
	}
}

// TestLiveScriptDeclaresTheGoCodes ties live.lua to its Go declaration.
func TestLiveScriptDeclaresTheGoCodes(t *testing.T) {
	t.Parallel()
	for _, err := range liveScript.Check(redisstore.ScriptWords()) {
		t.Error(err)
	}
}
