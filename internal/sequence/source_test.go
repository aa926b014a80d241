package sequence

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// memSource is an in-memory Source: a counter up to limit, recording the
// sizes asked for.
type memSource struct {
	mu    sync.Mutex
	last  int64
	limit int64
	asked []int64
}

var errMemExhausted = errors.New("mem exhausted")

func (s *memSource) Reserve(_ context.Context, want int64, exact bool) (int64, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, want)
	left := s.limit - s.last
	if left <= 0 || exact && left < want {
		return 0, 0, errMemExhausted
	}
	n := min(want, left)
	first := s.last + 1
	s.last += n
	return first, n, nil
}

// TestSourcePluggable runs the Allocator on a source of its own: the step is
// what the source is asked for, a short last range is served to its end,
// Block takes exact ranges, and errors name the allocator.
func TestSourcePluggable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := &memSource{limit: 25}
	a := NewFromSource("mem", src, Options{Step: 10})
	t.Cleanup(a.Close)

	for want := int64(1); want <= 12; want++ {
		if id := mustNext(t, ctx, a); id != want {
			t.Fatalf("Next = %d, want %d", id, want)
		}
	}
	if first, err := a.Block(ctx, 5); err != nil || first != 13 {
		// 13..20 are left of the cached segment.
		t.Fatalf("Block(5) = %d, %v; want 13 from memory", first, err)
	}
	if _, err := a.Block(ctx, 20); !errors.Is(err, errMemExhausted) {
		t.Fatalf("Block(20) with 5 left in the source: err = %v", err)
	}
	var got []int64
	var err error
	for {
		var id int64
		if id, err = a.Next(ctx); err != nil {
			break
		}
		got = append(got, id)
	}
	// The rest of the segment, then the source's short last range.
	if len(got) != 8 || got[0] != 18 || got[7] != 25 {
		t.Fatalf("rest = %v, want 18..25", got)
	}
	if !errors.Is(err, errMemExhausted) || !strings.Contains(err.Error(), `"mem"`) {
		t.Fatalf("err = %v, want the source's error naming the allocator", err)
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	for _, n := range src.asked {
		if n != 10 && n != 20 {
			t.Fatalf("source asked for %v, want segments of 10 and the block of 20", src.asked)
		}
	}
}

func TestSourceMisbehaving(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := NewFromSource("bad", SourceFunc(func(context.Context, int64, bool) (int64, int64, error) {
		return 1, 0, nil // an empty range and no error
	}), Options{})
	t.Cleanup(a.Close)
	if id, err := a.Next(ctx); err == nil {
		t.Fatalf("Next = %d from an empty range", id)
	}
}
