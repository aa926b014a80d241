package limits

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisscript"
)

const (
	// admitBatchMax bounds the reservations one pipeline carries.
	admitBatchMax = 64
	// admitInFlight bounds the pipelines in flight at once, as the grab
	// coalescer's workers do: a slow Redis master holds up the batches
	// that include one of its users, not every reservation of the process.
	admitInFlight = 4
	// admitQueueWait bounds how long a reservation waits for a pipeline to
	// take it; past it the grab is refused as unavailable, having sent
	// nothing. Only a Redis far slower than its timeouts allow gets there.
	admitQueueWait = time.Second
)

// errQueueWait: a reservation waited admitQueueWait for a pipeline.
var errQueueWait = errors.New("user limits: no pipeline took the reservation in time")

// errNotAnswered is the reply of a call its pipeline did not answer.
var errNotAnswered = errors.New("user limits: call not answered")

// admitter sends the user_reserve.lua calls of grabs that arrive together in
// one pipeline, as the grab coalescer does for the grab script: a group
// commit with no goroutine of its own. A call that finds fewer than
// admitInFlight pipelines in flight sends at once, alone; calls that arrive
// meanwhile wait, and when a pipeline returns, the first of them sends all
// that waited (up to admitBatchMax). So a lone grab pays no delay, and under
// load one round trip serves many grabs.
//
// Each reservation stays its own script call on its own user's slot: the
// pipeline shares the round trip, never a script run. Script calls are sent
// at most once (redisscript's once), in a pipeline as alone: a call whose
// reply is lost fails, and a failed reservation is kept (the user's day
// counted one high, never low).
type admitter struct {
	rdb redis.UniversalClient

	mu       sync.Mutex
	inFlight int // callers sending a pipeline
	pending  []*admitCall
}

// admitCall is one reservation and, once ready is closed, its reply, or the
// turn to lead.
type admitCall struct {
	keys []string
	args []any

	ready chan struct{}
	lead  bool // set under mu: this waiting call sends the next pipeline
	sent  bool // set under mu: a pipeline has it; it can no longer be withdrawn

	code    redisscript.Code
	payload any
	err     error
}

// run makes the call and sets its reply, or returns an error having sent
// nothing: ctx's, when the caller left before its call was sent, or
// errQueueWait.
func (a *admitter) run(ctx context.Context, c *admitCall) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a.mu.Lock()
	if a.inFlight < admitInFlight {
		a.inFlight++
		a.mu.Unlock()
		a.send(ctx, c)
		return nil
	}
	c.ready = make(chan struct{})
	a.pending = append(a.pending, c)
	a.mu.Unlock()
	wait := time.NewTimer(admitQueueWait)
	defer wait.Stop()
	select {
	case <-c.ready:
	case <-ctx.Done():
		if a.withdraw(c) {
			return ctx.Err()
		}
	case <-wait.C:
		if a.withdraw(c) {
			return errQueueWait
		}
	}
	// Sent, or chosen to send the next pipeline, which the calls behind it
	// wait for: see it through. Redis's timeouts bound it.
	<-c.ready
	if c.lead {
		a.send(ctx, c)
	}
	return nil
}

// withdraw takes c out of the queue if no pipeline has it and it was not
// chosen to send the next one.
func (a *admitter) withdraw(c *admitCall) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.sent || c.lead {
		return false
	}
	a.pending = slices.DeleteFunc(a.pending, func(p *admitCall) bool { return p == c })
	return true
}

// send runs a pipeline of c (unless its caller has left meanwhile) and up
// to admitBatchMax-1 waiting calls, gives each its reply, and hands the turn
// to the next waiting call, if any.
func (a *admitter) send(ctx context.Context, c *admitCall) {
	a.mu.Lock()
	batch := make([]*admitCall, 0, admitBatchMax)
	if ctx.Err() == nil {
		batch = append(batch, c)
	} else {
		// A leader whose caller left still sends for the others, not for
		// itself: nothing is reserved for a grab that will not be made.
		c.err = ctx.Err()
	}
	n := min(len(a.pending), admitBatchMax-len(batch))
	batch = append(batch, a.pending[:n]...)
	a.pending = slices.Delete(a.pending, 0, n)
	for _, b := range batch {
		b.sent = true
		b.err = errNotAnswered // until the pipeline answers it
	}
	a.mu.Unlock()
	// Deferred, so that even a panic in the pipeline passes the turn on
	// rather than leaving every later call waiting.
	defer a.handOff(c, batch)

	// The pipeline serves every call of the batch, so it is not cut short
	// when the one sending it is: Redis's timeouts bound it.
	a.pipeline(context.WithoutCancel(ctx), batch)
}

// handOff wakes the batch's waiting calls (all but the leader), after
// passing the turn to send to the next waiting call, if any.
func (a *admitter) handOff(leader *admitCall, batch []*admitCall) {
	a.mu.Lock()
	if len(a.pending) > 0 {
		next := a.pending[0]
		a.pending = slices.Delete(a.pending, 0, 1)
		next.lead, next.sent = true, true
		close(next.ready)
	} else {
		a.inFlight--
	}
	a.mu.Unlock()
	for _, b := range batch {
		if b != leader {
			close(b.ready)
		}
	}
}

// pipeline runs the batch's scripts in one round trip per node, and again,
// in one more, with their source (EVAL) those Redis did not run because it
// did not know the script (a restarted Redis, a replica just promoted).
func (a *admitter) pipeline(ctx context.Context, batch []*admitCall) {
	switch len(batch) {
	case 0:
		return
	case 1:
		c := batch[0]
		c.code, c.payload, c.err = userReserve.Run(ctx, a.rdb, c.keys, c.args...)
		return
	}
	cmds := a.exec(ctx, batch, userReserve.EvalSha)
	var again []*admitCall
	for i, c := range batch {
		if err := cmds[i].Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			again = append(again, c)
			continue
		}
		c.code, c.payload, c.err = userReserve.Parse(cmds[i].Result())
	}
	if len(again) == 0 {
		return
	}
	cmds = a.exec(ctx, again, userReserve.Eval)
	for i, c := range again {
		c.code, c.payload, c.err = userReserve.Parse(cmds[i].Result())
	}
}

// exec sends one command per call, made by eval (EVALSHA or EVAL), in one
// pipeline.
func (a *admitter) exec(ctx context.Context, calls []*admitCall,
	eval func(context.Context, redisscript.Sender, []string, ...any) *redis.Cmd) []*redis.Cmd {
	pipe := a.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = eval(ctx, pipe, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	return cmds
}
