package grab_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/idempotency"
	"redpacket/internal/limits"
	"redpacket/internal/testenv/stack"
)

// A caller that goes away once its envelope is written still gets its
// answer recorded: the retry is answered with the first answer (the
// envelope open), not one rebuilt from the envelope as it is by then.
func TestIdempotentAnswerRecordedAfterTheCallerLeft(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	req := envelope.CreateRequest{SenderID: "s", TotalCents: 300, Count: 3}
	ir := idempotency.Request{Key: "order-1", Fingerprint: bytes.Repeat([]byte{7}, 32)}
	ctx, leave := context.WithCancel(t.Context())
	render := func(e grab.Envelope) ([]byte, error) {
		leave() // the client hangs up while its answer is made
		return json.Marshal(e)
	}
	first, err := s.Svc.CreateIdempotent(ctx, req, ir, render)
	if err != nil {
		t.Fatal(err)
	}
	var e grab.Envelope
	if err := json.Unmarshal(first.Body, &e); err != nil || e.Status != envelope.StatusOpen {
		t.Fatalf("first answer %s: %v", first.Body, err)
	}
	if _, err := s.Svc.Close(t.Context(), e.ID); err != nil {
		t.Fatal(err)
	}
	retry, err := s.Svc.CreateIdempotent(t.Context(), req, ir, func(e grab.Envelope) ([]byte, error) { return json.Marshal(e) })
	if err != nil || !retry.Replayed || !bytes.Equal(retry.Body, first.Body) {
		t.Errorf("retry: %s (replayed %v), %v; want the first answer %s", retry.Body, retry.Replayed, err, first.Body)
	}
}

// An answer rebuilt from the envelope (the first was never recorded) is the
// first byte for byte: open, with the expiry the request asked for, though
// the envelope was closed since, and the metadata in the bytes the create
// answered it with, though PostgreSQL keeps it as jsonb, which orders keys
// its own way and escapes nothing.
func TestIdempotentAnswerRebuiltWithTheCreatesMetadata(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	req := envelope.CreateRequest{SenderID: "s", TotalCents: 300, Count: 3,
		Metadata: map[string]string{"b": "1", "aa": "<&>", "ccc": "é"}}
	ir := idempotency.Request{Key: "order-2", Fingerprint: bytes.Repeat([]byte{8}, 32)}
	render := func(e grab.Envelope) ([]byte, error) { return json.Marshal(e) }
	first, err := s.Svc.CreateIdempotent(t.Context(), req, ir, render)
	if err != nil {
		t.Fatal(err)
	}
	// As if recording the first answer had failed; then the sender closes
	// the envelope, which moves its expiry and status.
	if _, err := s.Pool.Exec(t.Context(), `UPDATE idempotency_keys SET response_status = NULL, response_body = NULL`); err != nil {
		t.Fatal(err)
	}
	var e grab.Envelope
	if err := json.Unmarshal(first.Body, &e); err != nil {
		t.Fatal(err)
	}
	s.Clock.Advance(time.Minute)
	if _, err := s.Svc.Close(t.Context(), e.ID); err != nil {
		t.Fatal(err)
	}
	retry, err := s.Svc.CreateIdempotent(t.Context(), req, ir, render)
	if err != nil || !retry.Replayed || !bytes.Equal(retry.Body, first.Body) {
		t.Errorf("rebuilt answer: %s (replayed %v), %v; want the first answer %s", retry.Body, retry.Replayed, err, first.Body)
	}
}

// A rebuilt answer of an envelope suspended since (perhaps before it ever
// opened) says suspended, not open: it is not on offer.
func TestIdempotentAnswerRebuiltForASuspendedEnvelope(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	req := envelope.CreateRequest{SenderID: "s", TotalCents: 300, Count: 3}
	ir := idempotency.Request{Key: "order-3", Fingerprint: bytes.Repeat([]byte{9}, 32)}
	render := func(e grab.Envelope) ([]byte, error) { return json.Marshal(e) }
	first, err := s.Svc.CreateIdempotent(t.Context(), req, ir, render)
	if err != nil {
		t.Fatal(err)
	}
	var e grab.Envelope
	if err := json.Unmarshal(first.Body, &e); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(t.Context(), `UPDATE idempotency_keys SET response_status = NULL, response_body = NULL`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PG.Suspend(t.Context(), e.ID, "test", s.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	retry, err := s.Svc.CreateIdempotent(t.Context(), req, ir, render)
	var got grab.Envelope
	if err == nil {
		err = json.Unmarshal(retry.Body, &got)
	}
	if err != nil || got.Status != envelope.StatusSuspended {
		t.Errorf("rebuilt answer of a suspended envelope: %s, %v; want status suspended", retry.Body, err)
	}
}

// A keyed create retried while the first is still under way is not refused
// for the sender's cents the first one holds: it is answered as the first's
// repeat (in progress, or the first answer), whether the first is taking its
// ids (its key not written yet) or copying its packets (its key written,
// not committed).
func TestIdempotentRetryDuringTheFirstIsNotCappedByIt(t *testing.T) {
	t.Parallel()
	for stall, table := range map[string]string{"ids": "sequence_numbers", "packets": "packet_pool"} {
		t.Run(stall, func(t *testing.T) {
			t.Parallel()
			s := stack.New(t)
			cfg := s.Config
			cfg.Safety.Limiter = limits.New(s.RDB, s.Redis.Keys(), limits.Config{SenderDailyCents: 1000})
			svc := grab.New(cfg)
			req := envelope.CreateRequest{SenderID: "s", TotalCents: 600, Count: 3}
			ir := idempotency.Request{Key: "slow-1", Fingerprint: bytes.Repeat([]byte{4}, 32)}
			render := func(e grab.Envelope) ([]byte, error) { return json.Marshal(e) }

			// Cleanups run last registered first: the lock is released (and
			// t.Context ended) before the calls are waited for, so a test
			// that fails early leaves none of them running.
			var calls sync.WaitGroup
			t.Cleanup(calls.Wait)
			lock, err := s.Pool.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = lock.Rollback(context.WithoutCancel(t.Context())) })
			if _, err := lock.Exec(t.Context(), `LOCK TABLE `+table+` IN ACCESS EXCLUSIVE MODE`); err != nil {
				t.Fatal(err)
			}
			first := make(chan error, 1)
			calls.Go(func() {
				_, err := svc.CreateIdempotent(t.Context(), req, ir, render)
				first <- err
			})
			// However late the first runs: it has marked its key and waits
			// on the table (its cents held) before the others come.
			waitUntil(t, "the first create's mark in Redis", func(ctx context.Context) (bool, error) {
				n, err := s.RDB.Exists(ctx, s.Redis.Keys().CreateUnderWay("", ir.Key)).Result()
				return n == 1, err
			})
			waitUntil(t, "the first create waiting on the lock of "+table, func(ctx context.Context) (bool, error) {
				var waiting bool
				err := s.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks
					WHERE NOT granted AND relation = $1::regclass
					AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`, table).Scan(&waiting)
				return waiting, err
			})
			retried := make(chan error, 1)
			calls.Go(func() {
				_, err := svc.CreateIdempotent(t.Context(), req, ir, render)
				retried <- err
			})
			// The key with another body meanwhile: that body is refused.
			other := envelope.CreateRequest{SenderID: "s", TotalCents: 300, Count: 3}
			otherIR := idempotency.Request{Key: ir.Key, Fingerprint: bytes.Repeat([]byte{5}, 32)}
			if _, err := svc.CreateIdempotent(t.Context(), other, otherIR, render); !errors.Is(err, idempotency.ErrMismatch) {
				t.Errorf("the key with another body while the first was under way: %v, want a mismatch", err)
			}
			// The retry is answered while the first is still held.
			select {
			case err := <-retried:
				if !errors.Is(err, idempotency.ErrInProgress) {
					t.Errorf("retry while the first was under way: %v; want in progress, not the sender's limit", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("retry while the first was under way: no answer within 10s")
			}
			if err := lock.Rollback(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := <-first; err != nil {
				t.Fatalf("first create: %v", err)
			}
		})
	}
}

// waitUntil polls cond every 10 ms until it holds, failing the test when it
// errs or 10 s pass: a state another goroutine reaches, however late it runs.
func waitUntil(t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ok, err := cond(t.Context())
		switch {
		case err != nil:
			t.Fatalf("waiting for %s: %v", what, err)
		case ok:
			return
		case time.Now().After(deadline):
			t.Fatalf("waiting for %s: not within 10s", what)
		}
	}
}
