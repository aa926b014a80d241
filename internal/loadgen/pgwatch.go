package loadgen

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/db/dburl"
)

// pgWatcher measures how long granted claims take to reach PostgreSQL and
// checks that what is stored there matches the answers.
//
// Method, kept cheap so that watching does not slow the flusher it measures
// (on a small machine both share the CPU): every granted claim joins a
// pending set keyed by packet id, and its envelope's queue in the order the
// 200s arrived. A poll asks PostgreSQL only about pending ids, by primary key
// (`WHERE id = ANY($1) AND claimed_by IS NOT NULL`), and drops what it finds,
// so each claim is read once. It does not ask about every pending id: the
// flusher drains each shard's queue oldest first and an envelope lives on one
// shard, so an envelope's claims land in PostgreSQL roughly in grab order. A
// poll asks about the oldest window of each envelope's queue, and asks about
// the next window of an envelope only while a whole window was found. A poll
// thus costs about the claims that landed since the last one plus one window
// per envelope, however large the backlog. Every fullSweepEvery a poll asks
// about every pending id instead, so claims that land out of order are still
// found. Polls are spaced at least -pg-poll apart, and at least twice as long
// as the last poll took, which bounds the time PostgreSQL spends on them.
// (Polling by claimed_at would not work: claimed_at is the grab time carried
// from Redis, and a batch committed later can hold claims older than ones
// already seen.)
//
// A claim's lag is the start of the first poll that saw it minus the arrival
// of its 200: the row was committed before that poll's snapshot and after the
// previous poll's, so the figure is exact to within the spacing of polls
// (more for a claim that landed out of order, found by a full sweep).
type pgWatcher struct {
	conn  *pgx.Conn
	check *Checker

	mu       sync.Mutex
	pending  map[int64]pendingClaim
	queues   map[int64][]int64 // envelope -> packet ids in 200 order; found ones are skipped lazily
	lags     []time.Duration
	answered []time.Time // when each lag's claim was answered, for the timeline
	seen     int
	polls    int
	lastSeen time.Time // start of the poll that found the most recent claim
	lastFull time.Time
}

type pendingClaim struct {
	env      int64
	user     string
	grant    Grant
	answered time.Time
}

const (
	pollChunk      = 5000            // most ids sent in one query
	pollWindow     = 500             // ids of one envelope asked about at a time
	maxRounds      = 200             // windows of one envelope in one poll
	fullSweepEvery = 2 * time.Second // how often every pending id is asked about
	// pollTimeout bounds one query; a query is never cancelled by the end of
	// the load, since pgx closes a connection whose query is cancelled.
	pollTimeout = 10 * time.Second
)

func newPGWatcher(ctx context.Context, url string, check *Checker) (*pgWatcher, error) {
	conn, err := pgx.Connect(ctx, dburl.Session(url))
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return &pgWatcher{conn: conn, check: check, pending: map[int64]pendingClaim{}, queues: map[int64][]int64{}}, nil
}

func (w *pgWatcher) close() { _ = w.conn.Close(context.Background()) }

// add records a granted claim to look for.
func (w *pgWatcher) add(env int64, user string, g Grant, answered time.Time) {
	w.mu.Lock()
	w.pending[g.PacketID] = pendingClaim{env: env, user: user, grant: g, answered: answered}
	w.queues[env] = append(w.queues[env], g.PacketID)
	w.mu.Unlock()
}

// run polls until stop is closed, then closes done. A failed poll is retried
// at the next turn; the drain afterwards reports if PostgreSQL stays
// unreachable.
func (w *pgWatcher) run(interval time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		wait := w.pollPaced(interval)
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
	}
}

// pollPaced polls once and returns how long to wait before the next poll.
func (w *pgWatcher) pollPaced(interval time.Duration) time.Duration {
	start := time.Now()
	_ = w.poll()
	return max(interval, 2*time.Since(start))
}

// poll looks for pending claims once: a windowed poll, or a full sweep when
// one is due.
func (w *pgWatcher) poll() error {
	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	w.mu.Lock()
	w.polls++
	full := time.Since(w.lastFull) >= fullSweepEvery
	if full {
		w.lastFull = time.Now()
	}
	w.mu.Unlock()
	if full {
		return w.sweep(ctx)
	}
	envs := w.envelopes()
	for round := 0; len(envs) > 0 && round < maxRounds; round++ {
		ids, byEnv := w.windows(envs)
		if len(ids) == 0 {
			return nil
		}
		if err := w.query(ctx, ids); err != nil {
			return err
		}
		envs = w.wholeWindowsFound(byEnv)
	}
	return nil
}

// sweep asks about every pending id.
func (w *pgWatcher) sweep(ctx context.Context) error {
	w.mu.Lock()
	ids := make([]int64, 0, len(w.pending))
	for id := range w.pending {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	slices.Sort(ids)
	for chunk := range slices.Chunk(ids, pollChunk) {
		if err := w.query(ctx, chunk); err != nil {
			return err
		}
	}
	return nil
}

func (w *pgWatcher) envelopes() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	envs := make([]int64, 0, len(w.queues))
	for env := range w.queues {
		envs = append(envs, env)
	}
	return envs
}

// windows returns the oldest pending ids of each envelope, up to pollWindow
// each, all together and by envelope. Found ids at the head of a queue are
// dropped from it here.
func (w *pgWatcher) windows(envs []int64) ([]int64, map[int64][]int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var all []int64
	byEnv := make(map[int64][]int64, len(envs))
	for _, env := range envs {
		q := w.queues[env]
		for len(q) > 0 && !w.has(q[0]) {
			q = q[1:]
		}
		w.queues[env] = q
		var win []int64
		for _, id := range q {
			if len(win) == pollWindow {
				break
			}
			if w.has(id) {
				win = append(win, id)
			}
		}
		byEnv[env] = win
		all = append(all, win...)
	}
	return all, byEnv
}

func (w *pgWatcher) has(id int64) bool {
	_, ok := w.pending[id]
	return ok
}

// wholeWindowsFound returns the envelopes whose whole window was found and
// that have more pending: more of their claims may have landed.
func (w *pgWatcher) wholeWindowsFound(byEnv map[int64][]int64) []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var next []int64
	for env, win := range byEnv {
		if len(win) < pollWindow || slices.ContainsFunc(win, w.has) {
			continue
		}
		next = append(next, env)
	}
	return next
}

func (w *pgWatcher) query(ctx context.Context, ids []int64) error {
	start := time.Now()
	rows, err := dbsqlc.New(w.conn).LoadgenClaimedPackets(ctx, ids)
	if err != nil {
		return fmt.Errorf("poll PostgreSQL: %w", err)
	}
	for _, r := range rows {
		w.found(r.ID, r.ClaimedBy, r.AmountCents, r.OrderNo, start)
	}
	return nil
}

func (w *pgWatcher) found(id int64, user string, amount int64, orderNo string, at time.Time) {
	w.mu.Lock()
	p, ok := w.pending[id]
	if ok {
		delete(w.pending, id)
		w.lags = append(w.lags, max(at.Sub(p.answered), 0))
		w.answered = append(w.answered, p.answered)
		w.seen++
		w.lastSeen = at
	}
	w.mu.Unlock()
	if !ok {
		return
	}
	if user != p.user || amount != p.grant.AmountCents || (p.grant.OrderNo != "" && orderNo != p.grant.OrderNo) {
		w.check.Violation("envelope %d: packet %d answered to %s (%d cents, order %s), PostgreSQL says %s (%d cents, order %s)",
			p.env, id, p.user, p.grant.AmountCents, p.grant.OrderNo, user, amount, orderNo)
	}
}

// missing describes the claims PostgreSQL still lacks after the drain.
type missing struct {
	count    int
	packetID int64 // one of them, for the message
	claim    pendingClaim
	lastErr  error // the last poll's error, if it failed
}

// drain polls, paced as during the load, until no claim is pending or
// timeout passes. Its last poll is a full sweep, so a claim is reported
// missing only if no poll found it.
func (w *pgWatcher) drain(timeout, interval time.Duration) missing {
	deadline := time.Now().Add(timeout)
	for {
		start := time.Now()
		last := !start.Before(deadline)
		if last {
			w.mu.Lock()
			w.lastFull = time.Time{}
			w.mu.Unlock()
		}
		err := w.poll()
		m := missing{lastErr: err}
		w.mu.Lock()
		m.count = len(w.pending)
		for id, p := range w.pending {
			m.packetID, m.claim = id, p
			break
		}
		w.mu.Unlock()
		if m.count == 0 || last {
			return m
		}
		time.Sleep(max(interval, 2*time.Since(start)))
	}
}

// verifyEnvelopes reads every claim PostgreSQL holds in the run's envelopes
// and checks each against the answers. A claim nobody was answered is a
// violation, unless it belongs to a user whose first grab went unanswered.
// It returns the claims found and how many belong to unanswered grabs.
func (w *pgWatcher) verifyEnvelopes(envs []int64) (claims, unanswered int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := dbsqlc.New(w.conn).LoadgenEnvelopeClaims(ctx, envs)
	if err != nil {
		return 0, 0, fmt.Errorf("read claims from PostgreSQL: %w", err)
	}
	for _, r := range rows {
		id, env, user := r.ID, r.EnvelopeID, r.ClaimedBy
		claims++
		owner, ok := w.check.Owner(env, id)
		switch {
		case ok && owner == user:
		case w.check.Unanswered(env, user):
			unanswered++
		case ok:
			w.check.Violation("envelope %d: packet %d answered to %s, PostgreSQL says %s", env, id, owner, user)
		default:
			w.check.Violation("envelope %d: PostgreSQL holds packet %d claimed by %s, answered to nobody", env, id, user)
		}
	}
	return claims, unanswered, nil
}

// stats returns the lags (sorted by Summarize), the claims seen, the polls
// made and when the last claim was seen.
func (w *pgWatcher) stats() (Summary, int, int, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Summarize(slices.Clone(w.lags)), w.seen, w.polls, w.lastSeen
}

// lagsByAnswer returns every lag seen and when its claim was answered.
func (w *pgWatcher) lagsByAnswer() ([]time.Duration, []time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.lags), slices.Clone(w.answered)
}
