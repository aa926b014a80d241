package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// HeldClaim is a claim PostgreSQL holds, restored into Redis by Reload.
type HeldClaim struct {
	UserID string
	Claim
}

// Reload replaces an envelope's Redis state with PostgreSQL's: the claims in
// held (their users can only repeat), the packets in pool, and an open meta
// whose grabbed cents are those of held, with the envelope's gates. Redis
// must show the envelope suspended or forgotten (ErrNotSuspended).
//
// It goes in steps (one that drops what Redis held, then a chunk of claims
// or packets a call, then one that opens), so that a large envelope does
// not hold its Redis (every shard on it) for the whole reload: in one call,
// a million packets with half a million claims held Redis for 2.3-3.2 s,
// up to the client's read timeout, and the reload could be reported failed
// when it had opened the envelope (BENCHMARKS.md, "Reloading a large
// envelope"). Until it opens, grabs are refused but a holder's repeat,
// answered with the claim written back.
func (s *Store) Reload(ctx context.Context, id int64, expiresAt time.Time, totalCents int64, count int, held []HeldClaim, pool []Packet, g Gates) error {
	var grabbed int64
	all := append(make([]Packet, 0, len(held)+len(pool)), pool...)
	for _, h := range held {
		grabbed += h.AmountCents
		all = append(all, Packet{ID: h.PacketID, AmountCents: h.AmountCents})
	}
	if err := checkPackets(totalCents, all); err != nil {
		return fmt.Errorf("reload envelope %d: %w", id, err)
	}
	if len(all) != count {
		return fmt.Errorf("reload envelope %d: %d claims and %d packets, want %d in all", id, len(held), len(pool), count)
	}
	token := stagingToken()
	staging := s.keys.Staging(id, token)
	buckets := s.keys.ClaimBucketKeys(id, count)
	s.bucketCache.forget(id)
	keys := append([]string{s.keys.Meta(id), s.keys.Pool(id), s.keys.Claims(id), s.keys.Recipients(id)}, buckets...)
	if _, _, err := reloadBeginScript.Run(ctx, s.rdb, keys, token); err != nil {
		return fmt.Errorf("reload envelope %d: %w", id, err)
	}
	if err := s.reloadClaims(ctx, id, token, buckets, held); err != nil {
		return fmt.Errorf("reload envelope %d: %w", id, err)
	}
	if err := s.stage(ctx, staging, pool); err != nil {
		s.dropStaged(ctx, staging)
		return fmt.Errorf("reload envelope %d: stage its %d packets: %w", id, len(pool), err)
	}
	args := make([]any, 0, 10+len(g.Recipients))
	args = append(args, token, expiresAt.UnixMilli(), count, totalCents, grabbed, len(held), len(buckets))
	args = g.args(args)
	keys = []string{s.keys.Meta(id), s.keys.Pool(id), s.keys.Recipients(id), staging}
	if _, _, err := reloadScript.Run(ctx, s.rdb, keys, args...); err != nil {
		s.dropStaged(ctx, staging) // the script drops it on its answers; an error may be before
		return fmt.Errorf("reload envelope %d: %w", id, err)
	}
	return nil
}

// reloadChunk is how many claims a call of reload_claims.lua writes.
const reloadChunk = 500

// reloadClaims writes held into the envelope's claim buckets (all of them,
// in order) reloadChunk claims at a time, bucket by bucket: a chunk then
// fills a few buckets rather than creating a key for nearly every claim.
// At 1,000,000 packets a chunk of 2,000 claims took 15-21 ms in user order,
// 4-13 ms in bucket order (SLOWLOG), a chunk of stageChunk packets about 1.
func (s *Store) reloadClaims(ctx context.Context, id int64, token string, buckets []string, held []HeldClaim) error {
	meta := s.keys.Meta(id)
	type placed struct {
		bucket int
		*HeldClaim
	}
	sorted := make([]placed, len(held))
	for i := range held {
		sorted[i] = placed{BucketOf(held[i].UserID, len(buckets)), &held[i]}
	}
	slices.SortFunc(sorted, func(a, b placed) int { return cmp.Compare(a.bucket, b.bucket) })
	for off := 0; off < len(sorted); off += reloadChunk {
		chunk := sorted[off:min(off+reloadChunk, len(sorted))]
		keys := []string{meta}
		args := make([]any, 0, 1+3*len(chunk))
		args = append(args, token)
		for i, h := range chunk {
			if i == 0 || h.bucket != chunk[i-1].bucket {
				keys = append(keys, buckets[h.bucket])
			}
			args = append(args, len(keys), h.UserID, string(appendClaim(nil, h.Claim)))
		}
		if _, _, err := reloadClaimsScript.Run(ctx, s.rdb, keys, args...); err != nil {
			return fmt.Errorf("claims %d on: %w", off, err)
		}
	}
	return nil
}
