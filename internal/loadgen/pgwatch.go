package loadgen

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgWatcher measures how long granted claims take to reach PostgreSQL and
// checks that what is stored there matches the answers.
//
// Method: every granted claim joins a pending set keyed by packet id, with
// the time its 200 arrived. Each poll asks only for the pending ids that are
// now claimed (`WHERE id = ANY($1) AND claimed_by IS NOT NULL`, a primary-key
// lookup), and drops what it finds from the set. So each claim is read from
// PostgreSQL once, and a poll costs in proportion to the claims in flight
// (rate x lag), not to the size of the table or of the run. Polling by
// claimed_at would not work: claimed_at is the grab time carried from Redis,
// and a batch committed later can hold claims older than ones already seen.
//
// A claim's lag is the start of the first poll that saw it minus the arrival
// of its 200: the row was committed before that poll's snapshot and after the
// previous poll's, so the figure is exact to within one poll interval.
type pgWatcher struct {
	conn  *pgx.Conn
	check *Checker

	mu       sync.Mutex
	pending  map[int64]pendingClaim
	lags     []time.Duration
	seen     int
	polls    int
	lastSeen time.Time // start of the poll that found the most recent claim
}

type pendingClaim struct {
	env      int64
	user     string
	grant    Grant
	answered time.Time
}

// pollChunk bounds the ids sent in one query.
const pollChunk = 5000

func newPGWatcher(ctx context.Context, url string, check *Checker) (*pgWatcher, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return &pgWatcher{conn: conn, check: check, pending: map[int64]pendingClaim{}}, nil
}

func (w *pgWatcher) close() { _ = w.conn.Close(context.Background()) }

// add records a granted claim to look for.
func (w *pgWatcher) add(env int64, user string, g Grant, answered time.Time) {
	w.mu.Lock()
	w.pending[g.PacketID] = pendingClaim{env: env, user: user, grant: g, answered: answered}
	w.mu.Unlock()
}

// pollTimeout bounds one poll; a poll is never cancelled half-way by the end
// of the load, since pgx closes a connection whose query is cancelled.
const pollTimeout = 10 * time.Second

// run polls every interval until stop is closed, then closes done. A failed
// poll is retried at the next tick; the drain afterwards reports if
// PostgreSQL stays unreachable.
func (w *pgWatcher) run(interval time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			_ = w.poll()
		}
	}
}

// poll looks for the pending claims once.
func (w *pgWatcher) poll() error {
	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	w.mu.Lock()
	ids := make([]int64, 0, len(w.pending))
	for id := range w.pending {
		ids = append(ids, id)
	}
	w.polls++
	w.mu.Unlock()
	slices.Sort(ids)
	for chunk := range slices.Chunk(ids, pollChunk) {
		if err := w.pollChunk(ctx, chunk); err != nil {
			return err
		}
	}
	return nil
}

func (w *pgWatcher) pollChunk(ctx context.Context, ids []int64) error {
	start := time.Now()
	rows, err := w.conn.Query(ctx, `SELECT id, claimed_by, amount_cents, coalesce(order_no, '')
		FROM packets WHERE id = ANY($1) AND claimed_by IS NOT NULL`, ids)
	if err != nil {
		return fmt.Errorf("poll PostgreSQL: %w", err)
	}
	var id, amount int64
	var user, orderNo string
	_, err = pgx.ForEachRow(rows, []any{&id, &user, &amount, &orderNo}, func() error {
		w.found(id, user, amount, orderNo, start)
		return nil
	})
	if err != nil {
		return fmt.Errorf("poll PostgreSQL: %w", err)
	}
	return nil
}

func (w *pgWatcher) found(id int64, user string, amount int64, orderNo string, at time.Time) {
	w.mu.Lock()
	p, ok := w.pending[id]
	if ok {
		delete(w.pending, id)
		w.lags = append(w.lags, max(at.Sub(p.answered), 0))
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

// drain polls until no claim is pending or timeout passes.
func (w *pgWatcher) drain(timeout, interval time.Duration) missing {
	deadline := time.Now().Add(timeout)
	for {
		err := w.poll()
		m := missing{lastErr: err}
		w.mu.Lock()
		m.count = len(w.pending)
		for id, p := range w.pending {
			m.packetID, m.claim = id, p
			break
		}
		w.mu.Unlock()
		if m.count == 0 || time.Now().After(deadline) {
			return m
		}
		time.Sleep(interval)
	}
}

// verifyEnvelopes reads every claim PostgreSQL holds in the run's envelopes
// and checks each against the answers. A claim nobody was answered is a
// violation, unless it belongs to a user whose first grab went unanswered.
// It returns the claims found and how many belong to unanswered grabs.
func (w *pgWatcher) verifyEnvelopes(envs []int64) (claims, unanswered int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := w.conn.Query(ctx, `SELECT id, envelope_id, claimed_by FROM packets
		WHERE envelope_id = ANY($1) AND claimed_by IS NOT NULL`, envs)
	if err != nil {
		return 0, 0, fmt.Errorf("read claims from PostgreSQL: %w", err)
	}
	var id, env int64
	var user string
	_, err = pgx.ForEachRow(rows, []any{&id, &env, &user}, func() error {
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
		return nil
	})
	if err != nil {
		return claims, unanswered, fmt.Errorf("read claims from PostgreSQL: %w", err)
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
