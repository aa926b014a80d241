package audit

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	rs "redpacket/internal/redisscript"
	"redpacket/internal/redisstore"
)

//go:embed live.lua
var liveSource string

// liveScript reads one envelope's state; KEYS, ARGV and reply are documented
// in live.lua.
var liveScript = rs.New("live.lua", liveSource, rs.Reply{Code: liveRead, Name: "READ"})

// liveRead is live.lua's one reply code.
const liveRead rs.Code = 0

// liveState is an envelope's state in Redis.
type liveState struct {
	Loaded       bool                  // meta present
	Status       redisstore.MetaStatus // meta status
	GrabbedCents string                // meta grabbed_cents as stored, parsed by checkRedis
	Pool         int64                 // packets not grabbed
	Claims       int64                 // users holding a packet
}

// readLive reads the Redis state of the envelopes in one pipeline. It uses
// EVAL rather than EVALSHA: a pipeline cannot fall back when the server does
// not have the script cached, and the script is a few hundred bytes.
func readLive(ctx context.Context, rdb redis.UniversalClient, keys redisstore.Keys, ids []int64) (map[int64]liveState, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(ids))
	for i, id := range ids {
		cmds[i] = liveScript.Eval(ctx, pipe, []string{keys.Meta(id), keys.Pool(id), keys.Claims(id)})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, wrap(fmt.Sprintf("read redis state of %d envelopes", len(ids)), err)
	}
	out := make(map[int64]liveState, len(ids))
	for i, id := range ids {
		_, payload, err := liveScript.Parse(cmds[i].Result())
		var l liveState
		if err == nil {
			l, err = parseLive(payload)
		}
		if err != nil {
			return nil, wrap(fmt.Sprintf("redis state of envelope %d", id), err)
		}
		out[id] = l
	}
	return out, nil
}

// parseLive reads live.lua's payload.
func parseLive(payload any) (liveState, error) {
	vals, err := rs.List(payload, 4)
	if err != nil {
		return liveState{}, err
	}
	pool, err := rs.Int(vals[2])
	if err != nil {
		return liveState{}, err
	}
	claims, err := rs.Int(vals[3])
	if err != nil {
		return liveState{}, err
	}
	status, loaded := vals[0].(string)
	grabbed, _ := vals[1].(string)
	return liveState{Loaded: loaded, Status: redisstore.MetaStatus(status), GrabbedCents: grabbed, Pool: pool, Claims: claims}, nil
}

// checkRedis compares an open or expired envelope in PostgreSQL (r, read
// first) with its state in Redis (l, read after).
func checkRedis(r envelopeRow, l liveState) []Violation {
	v := func(check, format string, args ...any) []Violation {
		return []Violation{{EnvelopeID: r.ID, Check: check, Detail: fmt.Sprintf(format, args...)}}
	}
	if !l.Loaded {
		return v(CheckRedisMissing, "%s in PostgreSQL but no meta in Redis (pool %d, claims %d)", r.Status, l.Pool, l.Claims)
	}
	grabbed, err := strconv.ParseInt(l.GrabbedCents, 10, 64)
	if err != nil {
		return v(CheckRedisMeta, "meta grabbed_cents %q is not a number", l.GrabbedCents)
	}
	var out []Violation
	if grabbed < r.ClaimedCents {
		out = append(out, v(CheckRedisBehind, "Redis grabbed_cents %d < PostgreSQL claimed_cents %d: Redis lost grabs",
			grabbed, r.ClaimedCents)...)
	}
	// Closing drops the pool, so the lengths add up only while open.
	if l.Status == redisstore.MetaOpen && l.Pool+l.Claims != r.Count {
		out = append(out, v(CheckRedisPool, "pool %d + claims %d != count %d", l.Pool, l.Claims, r.Count)...)
	}
	return out
}
