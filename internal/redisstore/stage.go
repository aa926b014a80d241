package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// An envelope of more than loadInline packets is loaded in steps, so that
// no script holds its Redis (every shard on it) for long: its packets are
// staged stageChunk at a time in a list of the loader's own (stage.lua),
// which load.lua then makes the pool in one step. A chunk of 2,000 packets
// is a script of a few milliseconds; loading 100,000 packets in one call
// held Redis for 27-36 ms on a quiet machine and up to 370 ms on a busy
// one, 1,000,000 for 0.5-1.9 s (BENCHMARKS.md, "Loading a large envelope").
// stagingTTL bounds how long a loader that stops half-way leaves its list.
const (
	loadInline = 2000
	stageChunk = 2000
	stagingTTL = 10 * time.Minute
)

// stage puts packets, in order, into the staging list key.
func (s *Store) stage(ctx context.Context, key string, packets []Packet) error {
	args := make([]any, 0, 2+stageChunk)
	for off := 0; off < len(packets); off += stageChunk {
		args = append(args[:0], off, stagingTTL.Milliseconds())
		args = appendPackets(args, packets[off:min(off+stageChunk, len(packets))])
		if _, _, err := stageScript.Run(ctx, s.rdb, []string{key}, args...); err != nil {
			return fmt.Errorf("packets %d on: %w", off, err)
		}
	}
	return nil
}

// dropStaged deletes a staging list a load gave up on, at once rather than
// when it expires; it may not exist.
func (s *Store) dropStaged(ctx context.Context, key string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = s.rdb.Unlink(ctx, key).Err() // it expires anyway
}

// stagingToken names one load's staging list: random, so that loaders of
// one envelope (its creator and the flusher's repair) never share one.
func stagingToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
