package redisstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// With WaitForReplicas on a cluster whose masters have one replica each,
// grabs on every shard are answered once the replica holds them; asking for
// more replicas than exist fails the grab with ErrNotReplicated, though the
// grab happened (a retry answers the same packet as a repeat).
func TestClusterGrabWaitsForReplicas(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.RedisCluster(t)
	s := numbered(redisstore.New(rdb, prefix, 16))
	ctx := t.Context()
	now := time.Now()
	for id := int64(1); id <= 16; id++ { // one envelope per shard
		load(t, s, id, 20, now)
	}
	s.WaitForReplicas(1, 2*time.Second)
	t.Cleanup(s.Coalesce(2, 16))
	var wg sync.WaitGroup
	errs := make(chan error, 16*10)
	for id := int64(1); id <= 16; id++ {
		for u := range 10 {
			wg.Go(func() {
				if _, err := s.Grab(ctx, id, fmt.Sprintf("u%d", u), now); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("grab with one replica asked: %v", err)
	}

	strict := numbered(redisstore.New(rdb, prefix, 16))
	strict.WaitForReplicas(2, 50*time.Millisecond)
	t.Cleanup(strict.Coalesce(1, 16))
	if _, err := strict.Grab(ctx, 1, "strict", now); !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("grab asking for 2 replicas of 1 = %v, want ErrNotReplicated", err)
	}
	c, err := s.Grab(ctx, 1, "strict", now)
	if err != nil || !c.Repeat {
		t.Fatalf("retry of the unconfirmed grab = %+v, %v; want its packet as a repeat", c, err)
	}
}

// A single Redis without replicas cannot confirm a grab.
func TestGrabWaitWithoutReplicas(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	now := time.Now()
	load(t, s, 1, 5, now)
	s.WaitForReplicas(1, 20*time.Millisecond)
	t.Cleanup(s.Coalesce(1, 8))
	if _, err := s.Grab(ctx, 1, "u", now); !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("grab = %v, want ErrNotReplicated", err)
	}
}

// The flusher side: a batch is handed out only once the replicas hold it.
func TestClusterTakeWaitsForReplicas(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.RedisCluster(t)
	s := numbered(redisstore.New(rdb, prefix, 16))
	ctx := t.Context()
	now := time.Now()
	load(t, s, 3, 5, now)
	for u := range 3 {
		if _, err := s.Grab(ctx, 3, fmt.Sprintf("u%d", u), now); err != nil {
			t.Fatal(err)
		}
	}
	shard := s.Keys().Shard(3)
	strict := numbered(redisstore.New(rdb, prefix, 16))
	strict.WaitForReplicas(2, 50*time.Millisecond)
	if _, err := strict.Take(ctx, shard, 10); !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("take asking for 2 replicas of 1 = %v, want ErrNotReplicated", err)
	}
	s.WaitForReplicas(1, 2*time.Second)
	batch, err := s.Take(ctx, shard, 10)
	if err != nil || len(batch) != 3 {
		t.Fatalf("take with one replica = %d claims, %v; want the 3 (the refused take left them in flight)", len(batch), err)
	}
}
