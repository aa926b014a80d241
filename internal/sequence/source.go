package sequence

import (
	"context"
	"fmt"
	"time"
)

// Source reserves ranges of ids for an Allocator. An Allocator calls Reserve
// from its fetch goroutine and from Block, so calls may overlap.
type Source interface {
	// Reserve reserves [first, first+n): no caller of the source, in this
	// process or another, may ever get any of them again.
	//
	// Without exact, want is the segment size asked for (0 means the
	// source's default) and n may be smaller when fewer are left; none left
	// is an error wrapping an "exhausted" sentinel. With exact, n == want or
	// an error; the source should then reserve nothing, and one that cannot
	// must lose the range rather than hand it out again.
	Reserve(ctx context.Context, want int64, exact bool) (first, n int64, err error)
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context, want int64, exact bool) (first, n int64, err error)

// Reserve calls f.
func (f SourceFunc) Reserve(ctx context.Context, want int64, exact bool) (int64, int64, error) {
	return f(ctx, want, exact)
}

// reserve asks the source for a range, names the allocator in its errors and
// reports the fetch to OnFetch.
func (a *Allocator) reserve(ctx context.Context, want int64, exact bool) (first, n int64, err error) {
	start := time.Now()
	first, n, err = a.src.Reserve(ctx, want, exact)
	if err == nil && (n <= 0 || exact && n != want) {
		// A source bug would otherwise hand out ids nobody reserved.
		err = fmt.Errorf("source reserved %d ids at %d, asked for %d (exact %t)", n, first, want, exact)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("sequence %q: %w", a.key, err)
	}
	if a.onFetch != nil {
		a.onFetch(a.key, n, time.Since(start))
	}
	return first, n, nil
}
