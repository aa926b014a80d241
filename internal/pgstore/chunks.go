package pgstore

import (
	"context"
	"fmt"
)

// ApplyClaimsInChunks makes a batch of claims durable as ApplyClaims does,
// in transactions of at most size claims that commit in the batch's order,
// up to writers of them open at once, each on a connection of its own:
// while one chunk's statement runs and commits, the COPYs of the chunks
// after it run. One PostgreSQL backend would otherwise do all of a
// flusher's work while the server's other cores wait. writers 1 writes the
// chunks one after the other.
//
// A chunk is added to its envelopes only after the chunk before committed,
// so chunks take their event positions, and commit, in order. When a step
// fails (a chunk refused, a replay of a chunk committed before a crash, a
// COPY that waited on another chunk's claim of the same packet longer than
// copyLockTimeout, a lost connection), the chunks committed stay, the open
// COPYs are rolled back before anything else is written (the guarded
// statement could otherwise wait on their rows), and the chunks not
// committed go through ApplyClaims one after the other, with its guards.
// Running it again with the same batch changes nothing and reports nothing
// new.
func (s *Store) ApplyClaimsInChunks(ctx context.Context, claims []Claim, size, writers int) (ApplyResult, error) {
	if size < 1 || len(claims) <= size || !amountsKnown(claims) {
		return s.ApplyClaims(ctx, claims)
	}
	var chunks [][]Claim
	for from := 0; from < len(claims); from += size {
		chunks = append(chunks, claims[from:min(from+size, len(claims))])
	}
	var total ApplyResult
	done, err := s.pipeChunks(ctx, chunks, max(writers, 1), &total)
	if err == nil {
		return total, nil
	}
	for _, c := range chunks[done:] {
		res, err := s.ApplyClaims(ctx, c)
		if err != nil {
			return ApplyResult{}, fmt.Errorf("chunk of %d claims after %d of %d committed: %w", len(c), done, len(chunks), err)
		}
		total.Add(res)
		done++
	}
	return total, nil
}

// pipeChunks appends chunks with up to writers transactions open at once,
// adding what each committed to total, until one step fails. It returns how
// many chunks committed, and the failure; nothing it began is left open.
func (s *Store) pipeChunks(ctx context.Context, chunks [][]Claim, writers int, total *ApplyResult) (int, error) {
	done := 0
	var copying []*chunkCopy // the chunks from done on whose COPY began, in order
	defer func() {
		// Later chunks first: an earlier COPY may be waiting on a later
		// chunk's rows. Each wait ends within copyLockTimeout anyway.
		for i := len(copying) - 1; i >= 0; i-- {
			if open, _ := copying[i].wait(); open != nil {
				open.rollback(ctx)
			}
		}
	}()
	for done < len(chunks) {
		for len(copying) < writers && done+len(copying) < len(chunks) {
			copying = append(copying, s.startCopy(ctx, chunks[done+len(copying)]))
		}
		open, err := copying[0].wait()
		copying = copying[1:]
		if err != nil {
			return done, err
		}
		res, err := open.commit(ctx)
		if err != nil {
			return done, err
		}
		total.Add(res)
		done++
	}
	return done, nil
}

// chunkCopy is a chunk's COPY running on a connection of its own.
type chunkCopy struct {
	done chan struct{}
	open *copiedClaims
	err  error
}

// startCopy begins a transaction and COPYs claims into it, in the
// background; wait returns the result.
func (s *Store) startCopy(ctx context.Context, claims []Claim) *chunkCopy {
	c := &chunkCopy{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.open, c.err = s.copyClaims(ctx, claims)
	}()
	return c
}

// wait returns the chunk's open transaction once its COPY returned.
func (c *chunkCopy) wait() (*copiedClaims, error) {
	<-c.done
	return c.open, c.err
}

// Add adds what one transaction changed to a batch's result: every field,
// so that a batch applied in parts reports what the whole would.
func (r *ApplyResult) Add(res ApplyResult) {
	r.Applied += res.Applied
	r.SoldOut = append(r.SoldOut, res.SoldOut...)
	r.Conflicts = append(r.Conflicts, res.Conflicts...)
	r.Contradicted = append(r.Contradicted, res.Contradicted...)
}
