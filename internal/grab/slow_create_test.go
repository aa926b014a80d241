package grab_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/idempotency"
	"redpacket/internal/limits"
	"redpacket/internal/testenv/stack"
)

// A keyed create that takes longer than its mark's lifetime (it waits on a
// lock a DBA holds) renews the mark: a repeat sent long after is told to
// wait (409), not refused for the cents the first holds (403) nor made
// again; once the first is done, the repeat gets its answer.
func TestSlowIdempotentCreateKeepsRepeatsWaiting(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := t.Context()
	svc := limited(s, limits.Config{SenderDailyCents: 1000})
	const markTTL = 3 * time.Second // renewed each second: a renewal may come 2 s late
	grab.SetCreateMarkTTL(svc, markTTL)
	req := envelope.CreateRequest{SenderID: "alice", TotalCents: 600, Count: 2}
	ir := idempotency.Request{Key: "slow-1", Fingerprint: bytes.Repeat([]byte{9}, 32)}
	render := func(e grab.Envelope) ([]byte, error) { return json.Marshal(e) }

	lock, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := lock.Exec(ctx, `LOCK TABLE packet_pool IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		a   idempotency.Answer
		err error
	}
	first := make(chan answer, 1)
	go func() {
		a, err := svc.CreateIdempotent(ctx, req, ir, render)
		first <- answer{a, err}
	}()
	waitUntil(t, "the first create waiting on the lock", func(ctx context.Context) (bool, error) {
		var n int
		err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return n > 0, err
	})
	time.Sleep(markTTL * 5 / 2) // the first mark would be gone by now
	if _, err := svc.CreateIdempotent(ctx, req, ir, render); !errors.Is(err, idempotency.ErrInProgress) {
		t.Errorf("repeat while a slow first create is under way: %v, want in progress", err)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-first
	if got.err != nil {
		t.Fatalf("first create: %v", got.err)
	}
	again, err := svc.CreateIdempotent(ctx, req, ir, render)
	if err != nil || !again.Replayed || !bytes.Equal(again.Body, got.a.Body) {
		t.Errorf("repeat once the first is done: %s (replayed %v), %v; want %s", again.Body, again.Replayed, err, got.a.Body)
	}
}
