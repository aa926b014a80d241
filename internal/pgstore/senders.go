package pgstore

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"redpacket/internal/db/dbsqlc"
)

// senderCacheSize bounds the senders a Store remembers. Claims arrive for
// the envelopes being grabbed now, a small and slowly changing set; at
// about 50 bytes an entry the bound is a few megabytes.
const senderCacheSize = 1 << 16

// senderCache remembers envelopes' senders (which never change) for the
// claims the flusher writes, so that a batch looks up only the envelopes
// it is the first to claim from. Several writers use it at once.
type senderCache struct {
	mu sync.Mutex
	m  map[int64]*string // one string per envelope, shared by its claims' rows
}

func newSenderCache() *senderCache { return &senderCache{m: make(map[int64]*string)} }

// missing returns the envelopes of claims the cache does not hold, each once.
func (c *senderCache) missing(claims []Claim) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int64
	seen := map[int64]bool{}
	for _, cl := range claims {
		if _, ok := c.m[cl.EnvelopeID]; !ok && !seen[cl.EnvelopeID] {
			seen[cl.EnvelopeID] = true
			out = append(out, cl.EnvelopeID)
		}
	}
	return out
}

// add remembers senders; a full cache starts over rather than tracking
// what was used last: the envelopes being grabbed cost one lookup again.
func (c *senderCache) add(rows []dbsqlc.EnvelopeSendersRow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m)+len(rows) > senderCacheSize {
		c.m = make(map[int64]*string, len(rows))
	}
	for _, r := range rows {
		c.m[r.ID] = &r.SenderID
	}
}

// fill sets each row's sender from looked (the senders just read: nil for
// an envelope that does not exist, whose claim its packet check refuses
// anyway) or else the cache, and returns the envelopes found in neither:
// another writer's add started the cache over after missing was asked.
func (c *senderCache) fill(rows []dbsqlc.CopyClaimsParams, looked map[int64]*string) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var lost []int64
	for i := range rows {
		id := rows[i].EnvelopeID
		sender, ok := looked[id]
		if !ok {
			sender, ok = c.m[id]
		}
		if !ok && !slices.Contains(lost, id) {
			lost = append(lost, id)
		}
		rows[i].SenderID = sender
	}
	return lost
}

// withSenders lays claims out as CopyClaims takes them, each with its
// envelope's sender, looking up (in the claims' transaction, q) those of
// envelopes not seen before. Each round looks up envelopes not looked up
// before, so the loop ends; a second round is rare (a cache started over
// between the two steps by another writer).
func (s *Store) withSenders(ctx context.Context, q *dbsqlc.Queries, claims []Claim) ([]dbsqlc.CopyClaimsParams, error) {
	out := copyRows(claims)
	looked := map[int64]*string{}
	for ids := s.senders.missing(claims); ; {
		if len(ids) > 0 {
			rows, err := q.EnvelopeSenders(ctx, ids)
			if err != nil {
				return nil, fmt.Errorf("read the senders of %d envelopes: %w", len(ids), err)
			}
			s.senders.add(rows)
			for _, id := range ids {
				looked[id] = nil
			}
			for _, r := range rows {
				looked[r.ID] = &r.SenderID
			}
		}
		if ids = s.senders.fill(out, looked); len(ids) == 0 {
			return out, nil
		}
	}
}
