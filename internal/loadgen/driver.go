package loadgen

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Why a load stopped.
const (
	stopGrabs       = "grabs"       // -grabs requests sent
	stopDuration    = "duration"    // -duration passed
	stopSoldOut     = "sold_out"    // every envelope sold out
	stopInterrupted = "interrupted" // SIGINT/SIGTERM
)

// envState is an envelope under load.
type envState struct {
	id      int64
	url     string
	count   int
	total   int64
	soldOut atomic.Bool // a first grab was refused sold_out, or every packet was granted
}

// driver runs the virtual users and holds what they share.
type driver struct {
	cfg    Config
	cl     *client
	envs   []*envState
	check  *Checker   // nil with -noop
	watch  *pgWatcher // nil without -database-url
	runTag string     // makes user ids unique to this run

	issued  atomic.Int64  // grabs handed out to users, to stop at -grabs
	next    atomic.Uint64 // round-robin over envelopes for first grabs
	stopped atomic.Bool
	once    sync.Once
	reason  string // written once, under once, before stopped is set

	// Live totals for the progress line; the report merges the users' own.
	done, granted, failed atomic.Int64
	lastGrant             atomic.Int64 // unix ns of the last 200 that granted a new packet

	started  time.Time // when the users started; the timeline counts from it
	timeline []Second  // per second of the load, once it ended
}

func (d *driver) halt(reason string) {
	d.once.Do(func() {
		d.reason = reason
		d.stopped.Store(true)
	})
}

// nextOpen picks the envelope for a first grab, round-robin over those not
// sold out; -1 when all are.
func (d *driver) nextOpen() int {
	n := uint64(len(d.envs))
	for range n {
		i := int(d.next.Add(1) % n)
		if !d.envs[i].soldOut.Load() {
			return i
		}
	}
	return -1
}

func (d *driver) allSoldOut() bool {
	for _, e := range d.envs {
		if !e.soldOut.Load() {
			return false
		}
	}
	return true
}

// drive runs the users until a bound is reached, ctx ends or every envelope
// is sold out, and returns their merged statistics and the time it took.
// A user finishes the grab in hand before stopping (bounded by -timeout).
func (d *driver) drive(ctx context.Context) (workerStats, time.Duration) {
	start := time.Now()
	d.started = start
	if d.cfg.Duration > 0 {
		timer := time.AfterFunc(d.cfg.Duration, func() { d.halt(stopDuration) })
		defer timer.Stop()
	}
	stopOnCancel := context.AfterFunc(ctx, func() { d.halt(stopInterrupted) })
	defer stopOnCancel()

	workers := make([]*worker, d.cfg.Users)
	var wg sync.WaitGroup
	for i := range workers {
		workers[i] = newWorker(d, i)
		wg.Go(workers[i].run)
	}
	wg.Wait()
	elapsed := time.Since(start)
	d.timeline = buildTimeline(workers, elapsed)
	total := newWorkerStats(0)
	for _, w := range workers {
		total.merge(&w.st)
	}
	return total, elapsed
}
