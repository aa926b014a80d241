package retention

import (
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"redpacket/internal/audit"
	"redpacket/internal/envelope"
	"redpacket/internal/flush"
	"redpacket/internal/testenv/stack"
)

// The audit does not miss a removed envelope: it reads the envelopes
// PostgreSQL holds, so one archived and deleted is neither lost nor a claim
// only Redis holds, even while Redis still has its keys; the envelope left
// is audited as before.
func TestAuditAfterRetention(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	sold, _ := s.Grabbed(t, 3, 3)
	open, _ := s.Grabbed(t, 3, 1)
	f := flush.New(s.Redis, s.PG, flush.Config{KeyTTL: time.Hour}, zaptest.NewLogger(t))
	if err := f.Drain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := f.Settle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if e := s.Envelope(t, sold.ID); e.Status != envelope.StatusSettled {
		t.Fatalf("envelope %d is %s; the test needs it settled", sold.ID, e.Status)
	}
	opts := audit.Options{Redis: s.RDB, Keys: s.Redis.Keys()}
	if rep, err := audit.Run(t.Context(), s.Pool, opts); err != nil || !rep.OK() || rep.Checked != 2 {
		t.Fatalf("audit before: %+v, %v", rep, err)
	}
	o := options(t, time.Hour)
	o.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	res, err := Run(t.Context(), s.Pool, o)
	if err != nil || res.Removed.Envelopes != 1 || res.Removed.Packets != 3 {
		t.Fatalf("retention: %+v, %v", res, err)
	}
	rep, err := audit.Run(t.Context(), s.Pool, opts)
	if err != nil || !rep.OK() || rep.Checked != 1 {
		t.Errorf("audit after retention: %+v, %v; want envelope %d alone, no violation", rep, err, open.ID)
	}
}
