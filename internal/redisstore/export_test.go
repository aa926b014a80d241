package redisstore

import (
	"context"
	"time"
)

// MemNumbering is memNumbering for the external tests.
type MemNumbering = memNumbering

// NumberInMemory makes s number its grants from reservations kept in
// memory: width digits, step numbers a reservation, days in loc.
func NumberInMemory(s *Store, width int, step int64, loc *time.Location) *MemNumbering {
	return newMemNumbering(s, width, step, loc)
}

// Supplies, Fences and Lows count the numbering's raises, fences and
// low-numbers signals.
func (m *MemNumbering) Supplies() int64 { return m.supplies.Load() }
func (m *MemNumbering) Fences() int64   { return m.fences.Load() }
func (m *MemNumbering) Lows() int64     { return m.lows.Load() }

// ClaimsOf is every claim Redis holds of an envelope, user -> claim: the
// buckets of its meta's packet count and the one hash of an envelope loaded
// before buckets.
func ClaimsOf(ctx context.Context, s *Store, id int64) map[string]string {
	keys := []string{s.keys.Claims(id)}
	if n, err := s.rdb.HGet(ctx, s.keys.Meta(id), fieldCount).Int(); err == nil {
		keys = append(keys, s.keys.ClaimBucketKeys(id, n)...)
	}
	out := map[string]string{}
	for _, k := range keys {
		for u, c := range s.rdb.HGetAll(ctx, k).Val() {
			out[u] = c
		}
	}
	return out
}

// grabFor is newGrab with the envelope's buckets as its meta records them.
func grabFor(s *Store, id int64, user string, now time.Time) grabCall {
	n, err := s.buckets(context.Background(), id)
	if err != nil {
		panic(err)
	}
	return s.newGrab(id, user, now, n)
}

// Twin is another Store on s's Redis and keys, with its own caches: another
// grabber process.
func Twin(s *Store) *Store { return New(s.rdb, s.keys.prefix, s.keys.shards) }

// ReloadClaimsHash is the hash reload_claims.lua is called by.
var ReloadClaimsHash = reloadClaimsScript.Hash()

// BeginReload runs only a reload's first step, under a token of its own: a
// second operator's reload that began and went no further.
func BeginReload(ctx context.Context, s *Store, id int64, count int) error {
	keys := append([]string{s.keys.Meta(id), s.keys.Pool(id), s.keys.Claims(id), s.keys.Recipients(id)},
		s.keys.ClaimBucketKeys(id, count)...)
	_, _, err := reloadBeginScript.Run(ctx, s.rdb, keys, stagingToken())
	return err
}
