package limits

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisscript"
)

// admitBatchMax bounds the calls one pipeline carries.
const admitBatchMax = 64

// admitter sends the user_reserve.lua and user_release.lua calls of grabs
// that arrive together in one pipeline, as the grab coalescer does for the
// grab script: a group commit with no goroutine of its own. A call that finds none in flight
// sends at once, alone; calls that arrive while one is in flight wait, and
// the first of them then sends all that waited. So a lone grab pays no
// delay, and under load one round trip serves many grabs. Each reservation
// stays its own script call on its own user's slot: the pipeline only
// shares the round trip, never a script run, so a user's counts are exactly
// what they are uncoalesced.
type admitter struct {
	rdb redis.UniversalClient

	mu      sync.Mutex
	busy    bool // a caller is sending; the others queue
	pending []*admitCall
}

// admitCall is one script call and, once ready is closed, its reply, or
// the turn to lead.
type admitCall struct {
	script *redisscript.Script
	keys   []string
	args   []any

	ready chan struct{}
	lead  bool // set under mu: this waiting call sends the next pipeline
	sent  bool // set under mu: its pipeline has it; it can no longer be withdrawn

	code    redisscript.Code
	payload any
	err     error
}

// run makes the call and sets its reply, or returns ctx's error having sent
// nothing (the caller left before its call was sent).
func (a *admitter) run(ctx context.Context, c *admitCall) error {
	a.mu.Lock()
	if !a.busy {
		a.busy = true
		a.mu.Unlock()
		a.send(ctx, c)
		return nil
	}
	c.ready = make(chan struct{})
	a.pending = append(a.pending, c)
	a.mu.Unlock()
	select {
	case <-c.ready:
	case <-ctx.Done():
		a.mu.Lock()
		if !c.sent && !c.lead {
			a.pending = slices.DeleteFunc(a.pending, func(p *admitCall) bool { return p == c })
			a.mu.Unlock()
			return ctx.Err()
		}
		a.mu.Unlock()
		// Sent, or chosen to send the next pipeline, which the calls
		// behind it wait for: see it through. Redis's timeouts bound it.
		<-c.ready
	}
	if c.lead {
		a.send(ctx, c)
	}
	return nil
}

// send runs a pipeline of c and up to admitBatchMax-1 waiting calls, gives
// each its reply, and hands the turn to the next waiting call, if any.
func (a *admitter) send(ctx context.Context, c *admitCall) {
	a.mu.Lock()
	n := min(len(a.pending), admitBatchMax-1)
	batch := append([]*admitCall{c}, a.pending[:n]...)
	a.pending = slices.Delete(a.pending, 0, n)
	for _, b := range batch {
		b.sent = true
		b.err = errNotAnswered // until the pipeline answers it
	}
	a.mu.Unlock()
	// Deferred, so that even a panic in the pipeline passes the turn on
	// rather than leaving every later call waiting.
	defer a.handOff(batch)

	// The pipeline serves every call of the batch, so it is not cut short
	// when the one sending it is: Redis's timeouts bound it.
	a.pipeline(context.WithoutCancel(ctx), batch)
}

// errNotAnswered is the reply of a call its pipeline did not answer.
var errNotAnswered = errors.New("user limits: call not answered")

// handOff wakes the batch's waiting calls, after passing the turn to send
// to the next waiting call, if any.
func (a *admitter) handOff(batch []*admitCall) {
	a.mu.Lock()
	if len(a.pending) > 0 {
		next := a.pending[0]
		a.pending = slices.Delete(a.pending, 0, 1)
		next.lead, next.sent = true, true
		close(next.ready)
	} else {
		a.busy = false
	}
	a.mu.Unlock()
	for _, b := range batch[1:] {
		close(b.ready)
	}
}

// pipeline runs the batch's scripts in one round trip per node, and again
// one at a time (EVAL) those Redis did not run because it did not know the
// script (a restarted Redis, a replica just promoted).
func (a *admitter) pipeline(ctx context.Context, batch []*admitCall) {
	if len(batch) == 1 {
		c := batch[0]
		c.code, c.payload, c.err = c.script.Run(ctx, a.rdb, c.keys, c.args...)
		return
	}
	pipe := a.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, c := range batch {
		cmds[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for i, c := range batch {
		if err := cmds[i].Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			c.code, c.payload, c.err = c.script.Run(ctx, a.rdb, c.keys, c.args...)
			continue
		}
		c.code, c.payload, c.err = c.script.Parse(cmds[i].Result())
	}
}
