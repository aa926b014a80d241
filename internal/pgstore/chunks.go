package pgstore

import (
	"context"
	"fmt"
	"sync"
)

// ApplyClaimsInChunks makes a batch of claims durable as ApplyClaims does,
// in transactions of at most size claims that commit in the batch's order,
// two at a time: while one chunk's statement runs and commits, the next
// chunk's COPY runs on another connection. One PostgreSQL backend would
// otherwise do all of a flusher's work while the server's other cores wait.
//
// A chunk is added to its envelopes only after the chunk before committed,
// so chunks take their event positions, and commit, in order. When a step
// fails (a chunk refused, a replay of a chunk committed before a crash, a
// lost connection), the chunks committed stay, the next chunk's open COPY
// is rolled back before anything else is written (the guarded statement
// could otherwise wait on its rows), and the chunks not committed go
// through ApplyClaims one after the other, with its guards. Running it
// again with the same batch changes nothing and reports nothing new.
func (s *Store) ApplyClaimsInChunks(ctx context.Context, claims []Claim, size int) (ApplyResult, error) {
	if size < 1 || len(claims) <= size || !amountsKnown(claims) {
		return s.ApplyClaims(ctx, claims)
	}
	var chunks [][]Claim
	for from := 0; from < len(claims); from += size {
		chunks = append(chunks, claims[from:min(from+size, len(claims))])
	}
	var total ApplyResult
	done, err := s.pipeChunks(ctx, chunks, &total)
	if err == nil {
		return total, nil
	}
	for _, c := range chunks[done:] {
		res, err := s.ApplyClaims(ctx, c)
		if err != nil {
			return ApplyResult{}, fmt.Errorf("chunk of %d claims after %d of %d committed: %w", len(c), done, len(chunks), err)
		}
		addResult(&total, res)
		done++
	}
	return total, nil
}

// pipeChunks appends chunks two at a time, adding what each committed to
// total, until one step fails. It returns how many chunks committed, and
// the failure; nothing it began is left open.
func (s *Store) pipeChunks(ctx context.Context, chunks [][]Claim, total *ApplyResult) (int, error) {
	open, err := s.copyClaims(ctx, chunks[0])
	for done := 0; ; done++ {
		if err != nil {
			return done, err
		}
		if done == len(chunks)-1 {
			res, err := open.commit(ctx)
			if err != nil {
				return done, err
			}
			addResult(total, res)
			return len(chunks), nil
		}
		var next *copiedClaims
		var nextErr error
		var wg sync.WaitGroup
		wg.Go(func() { next, nextErr = s.copyClaims(ctx, chunks[done+1]) })
		res, commitErr := open.commit(ctx)
		wg.Wait()
		if commitErr != nil {
			if next != nil {
				next.rollback(ctx)
			}
			return done, commitErr
		}
		addResult(total, res)
		open, err = next, nextErr
	}
}

// addResult adds what one transaction changed to a batch's result.
func addResult(total *ApplyResult, res ApplyResult) {
	total.Applied += res.Applied
	total.SoldOut = append(total.SoldOut, res.SoldOut...)
	total.Conflicts = append(total.Conflicts, res.Conflicts...)
	total.Contradicted = append(total.Contradicted, res.Contradicted...)
}
