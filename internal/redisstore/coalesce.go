package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// coalescer sends the grabs that arrive while a round trip is under way
// together: one grab script call per shard for all of that shard's grabs,
// all calls in one pipeline. The script decides each grab exactly as a call
// of its own would, one after another, so every answer is the same as with
// one call per grab; only round trips, system calls and script starts are
// shared.
type coalescer struct {
	store *Store
	in    chan *pendingGrab
	max   int
	quit  chan struct{}
	done  chan struct{} // closed once every worker has returned
	wg    sync.WaitGroup
}

type pendingGrab struct {
	call  grabCall
	ctx   context.Context // the caller's: one gone by the time it is sent is not
	reply chan grabReply  // buffered: a worker never waits for a caller
	// state is queued until a worker takes the grab to send it (taken) or
	// it is given up unsent because its caller left (gone), whichever comes
	// first: a caller that leaves knows whether its grab was sent.
	state atomic.Int32
}

// pendingGrab states.
const (
	queued int32 = iota
	taken
	gone
)

// coalesceTimeout bounds one pipeline; a caller's own context may end sooner.
const coalesceTimeout = 10 * time.Second

// Coalesce makes Grab share round trips: up to workers pipelines run at once,
// each carrying up to maxBatch grabs. It returns a function that stops the
// workers once the grabs in hand are answered; call it before closing the
// client.
func (s *Store) Coalesce(workers, maxBatch int) (stop func()) {
	c := &coalescer{store: s, in: make(chan *pendingGrab, workers*maxBatch), max: maxBatch,
		quit: make(chan struct{}), done: make(chan struct{})}
	for range workers {
		c.wg.Add(1)
		go c.work()
	}
	s.coalescer = c
	return func() {
		close(c.quit)
		c.wg.Wait()
		close(c.done)
	}
}

var pendingPool = sync.Pool{New: func() any { return &pendingGrab{reply: make(chan grabReply, 1)} }}

// grab queues one grab and waits for its answer or the end of ctx.
func (c *coalescer) grab(ctx context.Context, g grabCall) grabReply {
	select {
	case <-c.quit: // stopped: no worker would take it
		return grabReply{err: fmt.Errorf("%w: %w", errNotSent, redis.ErrClosed)}
	default:
	}
	p := pendingPool.Get().(*pendingGrab)
	p.call, p.ctx = g, ctx
	p.state.Store(queued)
	// The queue has room but under overload, and then a send that does not
	// wait needs neither the context's channel nor a three-way select.
	select {
	case c.in <- p:
	default:
		if r, queued := c.enqueue(ctx, p); !queued {
			return r
		}
	}
	select {
	case r := <-p.reply:
		p.ctx = nil
		pendingPool.Put(p)
		return r
	case <-ctx.Done():
		// The worker still answers into the buffered channel; p is left to
		// the garbage collector rather than reused while it may be written.
		// A grab no worker took is never sent: it took nothing (a limited
		// grab gives its reservation back). One taken may have.
		if p.state.CompareAndSwap(queued, gone) || p.state.Load() == gone {
			return grabReply{err: fmt.Errorf("%w: %w", errNotSent, ctx.Err())}
		}
		return grabReply{err: ctx.Err()}
	case <-c.done:
		// A grab queued between the stop check above and the stop is in
		// no worker's hands: no one will send it. One answered in the
		// workers' last drain is already in its buffered channel.
		select {
		case r := <-p.reply:
			return r
		default:
			return grabReply{err: fmt.Errorf("%w: %w", errNotSent, redis.ErrClosed)}
		}
	}
}

// enqueue waits for room in the queue, the end of ctx or the stop.
func (c *coalescer) enqueue(ctx context.Context, p *pendingGrab) (grabReply, bool) {
	select {
	case c.in <- p:
		return grabReply{}, true
	case <-ctx.Done():
		p.ctx = nil
		pendingPool.Put(p)
		return grabReply{err: fmt.Errorf("%w: %w", errNotSent, ctx.Err())}, false
	case <-c.quit:
		p.ctx = nil
		pendingPool.Put(p)
		return grabReply{err: fmt.Errorf("%w: %w", errNotSent, redis.ErrClosed)}, false
	}
}

func (c *coalescer) work() {
	defer c.wg.Done()
	batch := make([]*pendingGrab, 0, c.max)
	var groups callGroups
	for {
		select {
		case p := <-c.in:
			batch = append(batch[:0], p)
		case <-c.quit:
			c.drain(batch, &groups)
			return
		}
	fill:
		for len(batch) < c.max {
			select {
			case p := <-c.in:
				batch = append(batch, p)
			default:
				break fill
			}
		}
		c.send(batch, &groups)
	}
}

// drain answers whatever is still queued at stop.
func (c *coalescer) drain(batch []*pendingGrab, groups *callGroups) {
	for {
		select {
		case p := <-c.in:
			c.send(append(batch[:0], p), groups)
		default:
			return
		}
	}
}

// shardCall is one script call: the grabs of one shard and day, in arrival
// order.
type shardCall struct {
	grabs []*pendingGrab
	cmd   *redis.Cmd
	err   error // set when the call ran but its replicas did not confirm it
}

// send runs a batch as one pipeline of one call per shard (and day: a batch
// that straddles midnight numbers each grab under its own date). A script Redis
// does not know yet (a restarted Redis) fails with NOSCRIPT without running;
// such a batch is sent again once the script is loaded.
func (c *coalescer) send(batch []*pendingGrab, groups *callGroups) {
	// A grab whose caller left while it waited in the queue is not sent:
	// it would grant a packet no one is told about.
	live := batch[:0]
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil && p.state.CompareAndSwap(queued, gone) {
			p.reply <- grabReply{err: fmt.Errorf("%w: %w", errNotSent, err)}
			continue
		}
		if !p.state.CompareAndSwap(queued, taken) {
			continue // its caller left and was told it was not sent
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	// The batch is many callers': no one caller's context may cut it off
	// (a grab sent must learn its answer), so it has a deadline of its own.
	ctx, cancel := context.WithTimeout(context.Background(), coalesceTimeout)
	defer cancel()
	calls := groups.group(live)
	c.run(ctx, calls)
	// Only the calls that did not run are sent again: the others granted
	// packets, and running them twice would answer their users' first grabs
	// as repeats.
	if again := noScript(calls); len(again) > 0 {
		if err := c.loadScript(ctx); err == nil {
			c.run(ctx, again)
		}
		// A call refused again (or not sent again) never ran: it took
		// nothing.
		for _, sc := range noScript(again) {
			sc.cmd.SetErr(fmt.Errorf("%w: %w", errNotSent, sc.cmd.Err()))
		}
	}
	for _, sc := range calls {
		for i, r := range c.store.replies(sc) {
			sc.grabs[i].reply <- r
		}
	}
}

// callGroups sorts a worker's batches into calls, reusing the calls of the
// worker's earlier batches: a batch is sent and answered before the next is
// grouped, and nothing keeps a call after its batch is answered.
type callGroups struct {
	calls []*shardCall // this batch's
	spare []*shardCall // every call made so far, the first len(calls) in use
}

// group returns batch's calls, one per shard and day, each with its grabs in
// arrival order. A batch holds few shards: a search, rather than a map made
// for every batch.
func (g *callGroups) group(batch []*pendingGrab) []*shardCall {
	g.calls = g.calls[:0]
	for _, p := range batch {
		sc := g.find(p.call.shard, p.call.date)
		if sc == nil {
			sc = g.next()
		}
		sc.grabs = append(sc.grabs, p)
	}
	return g.calls
}

func (g *callGroups) find(shard int, date string) *shardCall {
	for _, sc := range g.calls {
		if c := sc.grabs[0].call; c.shard == shard && c.date == date {
			return sc
		}
	}
	return nil
}

// next is a call with no grabs, reused if an earlier batch made one.
func (g *callGroups) next() *shardCall {
	n := len(g.calls)
	if n == len(g.spare) {
		g.spare = append(g.spare, &shardCall{})
	}
	sc := g.spare[n]
	clear(sc.grabs) // the grabs answered are the pool's again
	sc.grabs, sc.cmd, sc.err = sc.grabs[:0], nil, nil
	g.calls = append(g.calls, sc)
	return sc
}

// run sends the calls: one pipeline, or with WaitForReplicas one pipeline
// per master ending in WAIT, since WAIT counts the replicas that hold the
// writes of its own connection.
func (c *coalescer) run(ctx context.Context, calls []*shardCall) {
	n, timeout := c.store.waitReplicas, c.store.waitTimeout
	if n <= 0 {
		c.pipeline(ctx, c.store.rdb, calls, nil)
		return
	}
	byNode, err := c.nodes(ctx, calls)
	if err != nil {
		for _, sc := range calls {
			sc.cmd = redis.NewCmd(ctx)
			sc.cmd.SetErr(fmt.Errorf("%w: %w", errNotSent, err)) // no master found: nothing sent
		}
		return
	}
	var wg sync.WaitGroup
	for node, group := range byNode {
		wg.Go(func() {
			// WAIT 0 would block until the pipeline's own timeout.
			wait := redis.NewIntCmd(ctx, "WAIT", n, max(timeout.Milliseconds(), 1))
			c.pipeline(ctx, node, group, wait)
			c.reloadIfMoved(ctx, group)
			if got, err := wait.Result(); err != nil || got < int64(n) {
				for _, sc := range group {
					sc.err = fmt.Errorf("%w: %d of %d replicas confirmed (%v)", ErrNotReplicated, got, n, err)
				}
			}
		})
	}
	wg.Wait()
}

// reloadIfMoved asks the cluster client to read the slots again when a
// master sent calls elsewhere: calls sent to a master directly are not
// redirected, so until the client learns of a failover or a moved slot every
// call for it would go to the old master. The calls themselves took nothing
// (TookNothing) and are answered as unavailable.
func (c *coalescer) reloadIfMoved(ctx context.Context, calls []*shardCall) {
	cluster, ok := c.store.rdb.(*redis.ClusterClient)
	if !ok {
		return
	}
	for _, sc := range calls {
		_, moved := redis.IsMovedError(sc.cmd.Err())
		_, ask := redis.IsAskError(sc.cmd.Err())
		if moved || ask {
			cluster.ReloadState(ctx)
			return
		}
	}
}

// nodes groups the calls by the master that holds their shard.
func (c *coalescer) nodes(ctx context.Context, calls []*shardCall) (map[redis.Cmdable][]*shardCall, error) {
	out := map[redis.Cmdable][]*shardCall{}
	for _, sc := range calls {
		node, err := c.store.master(ctx, sc.grabs[0].call.shard)
		if err != nil {
			return nil, fmt.Errorf("grab: %w", err)
		}
		out[node] = append(out[node], sc)
	}
	return out, nil
}

// loadScript loads the grab script where the calls run: every master of a
// cluster, or the one Redis.
func (c *coalescer) loadScript(ctx context.Context) error {
	if cluster, ok := c.store.rdb.(*redis.ClusterClient); ok {
		return cluster.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return grabScript.Load(ctx, m).Err()
		})
	}
	return grabScript.Load(ctx, c.store.rdb).Err()
}

// pipeline sends the calls, then wait if not nil, in one pipeline of node.
func (c *coalescer) pipeline(ctx context.Context, node redis.Cmdable, calls []*shardCall, wait *redis.IntCmd) {
	pipe := node.Pipeline()
	for _, sc := range calls {
		ks, args := c.store.grabArgs(sc)
		sc.cmd = grabScript.EvalSha(ctx, pipe, ks, args...)
		sc.err = nil
	}
	if wait != nil {
		_ = pipe.Process(ctx, wait)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
}

// noScript returns the calls Redis refused because it does not know the
// script (a restarted Redis, or a replica just promoted: the script cache is
// not replicated); they did not run.
func noScript(calls []*shardCall) []*shardCall {
	var out []*shardCall
	for _, sc := range calls {
		if err := sc.cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			out = append(out, sc)
		}
	}
	return out
}
