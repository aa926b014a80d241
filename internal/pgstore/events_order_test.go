package pgstore_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/pgstore"
)

// Several writers (as several flushers and an operator would be) write
// events in transactions they hold open for a random moment before
// committing, and now and then roll back. A reader polling from 0 all the
// while must see ids 1, 2, 3, ... each once, never one before a smaller one
// commits, and in the end every committed event. With positions from a plain
// sequence, a writer that took 5 and commits after the one that took 6 makes
// the reader skip 5 for good, and a rollback leaves a hole.
func TestEventPositionsFollowCommitOrder(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	const writers, txPerWriter = 4, 40
	var (
		mu        sync.Mutex
		committed = map[int64]bool{}
		wg        sync.WaitGroup
	)
	for w := range writers {
		wg.Go(func() {
			for range txPerWriter {
				ids, ok := writeSlowly(ctx, t, pool, int64(w+1))
				if !ok {
					continue
				}
				mu.Lock()
				for _, id := range ids {
					committed[id] = true
				}
				mu.Unlock()
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()

	seen := readAll(ctx, t, s, finished)
	mu.Lock()
	defer mu.Unlock()
	if len(committed) == 0 {
		t.Fatal("no writer committed")
	}
	for id := range committed {
		if !seen[id] {
			t.Errorf("committed event %d was never read", id)
		}
	}
	if len(seen) != len(committed) {
		t.Errorf("read %d events, %d committed", len(seen), len(committed))
	}
}

// writeSlowly writes 1-3 events in a transaction, waits up to 3 ms, and
// commits (five times in six) or rolls back. ok reports a commit.
func writeSlowly(ctx context.Context, t *testing.T, pool *pgxpool.Pool, env int64) (ids []int64, ok bool) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Error(err)
		return nil, false
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if ids, err = pgstore.WriteTestEvents(ctx, tx, env, 1+rand.IntN(3)); err != nil {
		t.Error(err)
		return nil, false
	}
	time.Sleep(rand.N(3 * time.Millisecond))
	if rand.IntN(6) == 0 {
		return nil, false
	}
	if err := tx.Commit(ctx); err != nil {
		t.Error(err)
		return nil, false
	}
	return ids, true
}

// readAll polls the events from 0 until finished is closed and nothing more
// is there, failing the test on a gap, a repeat or a step back. It returns
// the ids read.
func readAll(ctx context.Context, t *testing.T, s *pgstore.Store, finished <-chan struct{}) map[int64]bool {
	seen := map[int64]bool{}
	var cursor int64
	for {
		var last bool
		select {
		case <-finished:
			last = true // a read that starts now sees every commit
		default:
		}
		evs, err := s.EventsAfter(ctx, cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			switch {
			case seen[e.ID]:
				t.Errorf("event %d read twice", e.ID)
			case e.ID != cursor+1:
				t.Errorf("after event %d the next one read is %d", cursor, e.ID)
			}
			seen[e.ID] = true
			cursor = e.ID
		}
		if last && len(evs) == 0 {
			return seen
		}
	}
}
