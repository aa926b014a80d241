package redisstore

import (
	"context"
	"fmt"
)

// Batch is a shard's claims taken into its in-flight list (TakeBatch),
// parsed: the flusher works on Claims and never sees the queue's text,
// which stays in this package. Entries that do not parse are kept apart,
// for the shard's rejected list. AckBatch deletes the in-flight batch once
// it is written.
type Batch struct {
	Shard  int
	Claims []QueuedClaim
	// entries[i] is the queue entry of Claims[i]; malformed are the entries
	// that did not parse; taken is the whole batch as it was taken, which
	// the ack checks it still is.
	entries   []string
	malformed []string
	taken     []string
}

// Len is the number of entries taken, parsed or not.
func (b Batch) Len() int { return len(b.taken) }

// Malformed is the number of entries that did not parse.
func (b Batch) Malformed() int { return len(b.malformed) }

// Entry is the queue entry of Claims[i] as text, for logs.
func (b Batch) Entry(i int) string { return renderQueued(b.entries[i]) }

// TakeBatch moves up to max claims of a shard into its in-flight list, or
// takes again the in-flight batch a flusher left there (see Take), and
// parses them.
func (s *Store) TakeBatch(ctx context.Context, shard, max int) (Batch, error) {
	raw, err := s.Take(ctx, shard, max)
	if err != nil {
		return Batch{}, err
	}
	b := Batch{Shard: shard, taken: raw, Claims: make([]QueuedClaim, 0, len(raw)), entries: make([]string, 0, len(raw))}
	for _, r := range raw {
		q, err := ParseQueued(r)
		if err != nil {
			b.malformed = append(b.malformed, r)
			continue
		}
		b.Claims = append(b.Claims, q)
		b.entries = append(b.entries, r)
	}
	return b, nil
}

// AckBatch deletes the batch from the shard's in-flight list; acked is false
// when the list no longer holds it (another flusher took the shard over).
// With it, the entries of the batch that did not parse, and those of the
// claims at the indexes refused, go to the shard's rejected list, where an
// operator finds them: once, since a batch is acknowledged once. rejected
// is what was kept, as text (for logs); nothing when not acked.
func (s *Store) AckBatch(ctx context.Context, b Batch, refused []int) (acked bool, rejected []string, err error) {
	out := append([]string(nil), b.malformed...)
	for _, i := range refused {
		if i < 0 || i >= len(b.entries) {
			return false, nil, fmt.Errorf("reject claim %d of a batch of %d", i, len(b.entries))
		}
		out = append(out, b.entries[i])
	}
	if acked, err = s.Ack(ctx, b.Shard, b.taken, out); err != nil || !acked {
		return acked, nil, err
	}
	for i := range out {
		out[i] = renderQueued(out[i])
	}
	return true, out, nil
}
