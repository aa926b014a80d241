package flush

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/envelope"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
)

// Action is what an operator does with a suspended envelope.
type Action string

// The actions an operator can take on a suspended envelope.
const (
	// ActionReload puts the unclaimed packets back on offer, with the claims
	// PostgreSQL holds, so their users can only repeat.
	ActionReload Action = "reload"
	// ActionRefund refunds the unclaimed packets and settles the envelope.
	ActionRefund Action = "refund"
)

// ErrBlocked means a recovery cannot run now; the plan says why.
var ErrBlocked = errors.New("recovery cannot run now")

// Plan is what a recovery would do, from PostgreSQL and Redis as they are.
type Plan struct {
	Action         Action
	Envelope       pgstore.Envelope
	Claimed        int // packets claimed in PostgreSQL
	Unclaimed      int // packets neither claimed nor refunded
	UnclaimedCents int64
	Queued         int // the envelope's claims still waiting in Redis
	Redis          redisstore.Live
	Ledger         string // why its cents disagree with its packets; "" when they agree
	Blocked        string // why it cannot run now; "" when it can
}

// PlanRecovery looks at a suspended envelope and tells what action would do.
func (f *Flusher) PlanRecovery(ctx context.Context, id int64, action Action) (Plan, error) {
	if action != ActionReload && action != ActionRefund {
		return Plan{}, fmt.Errorf("unknown action %q: use %s or %s", action, ActionReload, ActionRefund)
	}
	p := Plan{Action: action}
	var err error
	if p.Envelope, err = f.pg.Envelope(ctx, id); err != nil {
		return Plan{}, err
	}
	ids, amounts, err := f.pg.UnclaimedPackets(ctx, id)
	if err != nil {
		return Plan{}, err
	}
	p.Unclaimed = len(ids)
	for _, a := range amounts {
		p.UnclaimedCents += a
	}
	claimed, err := f.pg.ClaimedCount(ctx, id)
	if err != nil {
		return Plan{}, err
	}
	p.Claimed = int(claimed)
	if p.Queued, err = f.redis.Queued(ctx, id); err != nil {
		return Plan{}, err
	}
	if p.Redis, err = f.redis.Live(ctx, id); err != nil {
		return Plan{}, err
	}
	switch err := f.pg.CheckLedger(ctx, id); {
	case errors.Is(err, pgstore.ErrLedger):
		p.Ledger = err.Error()
	case err != nil:
		return Plan{}, err
	}
	p.Blocked = p.blocked(f.now())
	return p, nil
}

func (p Plan) blocked(now time.Time) string {
	e := p.Envelope
	switch {
	case e.Status != envelope.StatusSuspended:
		return fmt.Sprintf("the envelope is %s; only a suspended envelope is recovered", e.Status)
	case p.Queued > 0:
		return fmt.Sprintf("%d of its claims still wait in Redis; let the flusher write them, then try again", p.Queued)
	case p.Ledger != "":
		// Neither action could finish: a refund settles, and a reload's
		// envelope is settled in the end, both checking the ledger.
		return p.Ledger + "; repair it in PostgreSQL first (flusher audit -all shows the figures)"
	case p.Action == ActionReload && !now.Before(e.ExpiresAt):
		return fmt.Sprintf("it expired at %s; refund it instead", e.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return ""
}

// Recover carries a plan out. Reload rewrites the envelope's Redis state from
// PostgreSQL, then reopens it; refund drops its Redis state (grabs of it are
// then answered from PostgreSQL), then settles it. Either can be repeated if
// it stops half-way.
//
// It holds the envelope's recovery lock throughout, so that a second
// recovery of the envelope waits, and plans again under it, once grants
// have stopped: the envelope may have changed since p was shown (another
// recovery done meanwhile, a claim granted by a Redis open again), and then
// nothing more is done.
func (f *Flusher) Recover(ctx context.Context, p Plan) (envelope.Status, error) {
	if p.Blocked != "" {
		return "", fmt.Errorf("%w: %s", ErrBlocked, p.Blocked)
	}
	id := p.Envelope.ID
	var status envelope.Status
	err := f.pg.WithRecoveryLock(ctx, id, func(held func(context.Context) error) error {
		e, err := f.pg.Envelope(ctx, id)
		if err != nil {
			return err
		}
		if e.Status != envelope.StatusSuspended {
			return fmt.Errorf("%w: the envelope is %s now; only a suspended envelope is recovered", ErrBlocked, e.Status)
		}
		// Stop grants first: Redis may show the envelope open again (a
		// recovery cut off between its steps, or a slow creator's late
		// load). Only then can no claim be on its way that the plan below
		// does not count. PostgreSQL says suspended, so Redis must grant
		// nothing.
		if _, err := f.redis.Suspend(ctx, id); err != nil {
			return err
		}
		now, err := f.PlanRecovery(ctx, id, p.Action)
		switch {
		case err != nil:
			return err
		case now.Blocked != "":
			return fmt.Errorf("%w: %s", ErrBlocked, now.Blocked)
		case now.Claimed != p.Claimed || now.Unclaimed != p.Unclaimed:
			return fmt.Errorf("%w: the envelope changed since the plan (%d claimed then, %d now); plan again",
				ErrBlocked, p.Claimed, now.Claimed)
		}
		status, err = f.recover(ctx, now, held)
		return err
	})
	return status, err
}

// recover carries out a plan made under the recovery lock, grants stopped;
// held tells, before each of its two steps, that the lock still is.
func (f *Flusher) recover(ctx context.Context, p Plan, held func(context.Context) error) (envelope.Status, error) {
	id := p.Envelope.ID
	if err := held(ctx); err != nil {
		return "", err
	}
	if p.Action == ActionRefund {
		// What Forget leaves (a forgotten meta, for KeyTTL) keeps a
		// creator's late load from opening the envelope again once it is
		// refunded.
		if err := f.redis.Forget(ctx, id, p.Envelope.Count, f.cfg.KeyTTL); err != nil {
			return "", err
		}
		if err := held(ctx); err != nil {
			return "", err
		}
		st, err := f.pg.Settle(ctx, id, f.now(), envelope.StatusSuspended)
		if err != nil {
			return "", err
		}
		f.log.Warn("suspended envelope refunded by an operator", zap.Int64("envelope_id", id),
			zap.Int64("claimed_cents", st.ClaimedCents), zap.Int64("refunded_cents", st.RefundedCents))
		f.warnBestCorrected(id, st)
		return st.Status, nil
	}
	if err := f.reload(ctx, p.Envelope); err != nil {
		return "", err
	}
	if err := held(ctx); err != nil {
		return "", err
	}
	status, err := f.pg.Reopen(ctx, id)
	if err != nil {
		return "", f.unreload(ctx, id, err)
	}
	f.log.Warn("suspended envelope reloaded by an operator", zap.Int64("envelope_id", id), zap.Stringer("status", status))
	return status, nil
}

// unreloadTimeout bounds stopping the grants of a reload PostgreSQL did not
// follow.
const unreloadTimeout = 10 * time.Second

// unreload stops the grants of an envelope Redis holds reloaded (open) while
// PostgreSQL still holds it suspended, its reopening having failed with
// err: the two agree again, and a recovery run again takes it from there
// (grants made meanwhile are queued, and written as any claim).
func (f *Flusher) unreload(ctx context.Context, id int64, err error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unreloadTimeout)
	defer cancel()
	if _, serr := f.redis.Suspend(ctx, id); serr != nil {
		return fmt.Errorf("envelope %d: reloaded in redis, which grants it, but postgres still holds it suspended "+
			"(reopen: %w), and its grants could not be stopped again (%w): run the recovery again now", id, err, serr)
	}
	return fmt.Errorf("envelope %d: reloaded in redis but not reopened in postgres (%w); its grants were stopped "+
		"again and it stays suspended: run the recovery again", id, err)
}

func (f *Flusher) reload(ctx context.Context, e pgstore.Envelope) error {
	held, err := f.pg.HeldClaims(ctx, e.ID)
	if err != nil {
		return err
	}
	ids, amounts, err := f.pg.UnclaimedPackets(ctx, e.ID)
	if err != nil {
		return err
	}
	claims := make([]redisstore.HeldClaim, len(held))
	for i, h := range held {
		claims[i] = redisstore.HeldClaim{UserID: h.UserID, Claim: redisstore.Claim{
			PacketID: h.PacketID, AmountCents: h.AmountCents, GrabbedAt: h.ClaimedAt, OrderNo: h.OrderNo,
		}}
	}
	pool := make([]redisstore.Packet, len(ids))
	for i := range ids {
		pool[i] = redisstore.Packet{ID: ids[i], AmountCents: amounts[i]}
	}
	g, err := f.gates(ctx, e)
	if err != nil {
		return err
	}
	return f.redis.Reload(ctx, e.ID, e.ExpiresAt, e.TotalCents, e.Count, claims, pool, g)
}

// WriteText prints the plan for an operator.
func (p Plan) WriteText(w io.Writer) error {
	e := p.Envelope
	reason := ""
	if e.SuspendReason != nil {
		reason = ": " + *e.SuspendReason
	}
	lines := []string{
		fmt.Sprintf("envelope %d (shard %d) is %s%s", e.ID, e.Shard, e.Status, reason),
		fmt.Sprintf("  total %d cents in %d packets, expires %s", e.TotalCents, e.Count, e.ExpiresAt.UTC().Format(time.RFC3339)),
		fmt.Sprintf("  postgres: %d packets claimed (%d cents), %d unclaimed (%d cents)",
			p.Claimed, e.ClaimedCents, p.Unclaimed, p.UnclaimedCents),
		p.redisLine(),
		fmt.Sprintf("  claims still queued in redis: %d", p.Queued),
	}
	if p.Redis.Loaded && p.Redis.GrabbedCents > e.ClaimedCents {
		lines = append(lines, fmt.Sprintf("  note: redis granted %d cents more than postgres holds; "+
			"if they are not queued, those grabs were answered but their claims are lost",
			p.Redis.GrabbedCents-e.ClaimedCents))
	}
	lines = append(lines, p.effect())
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

func (p Plan) redisLine() string {
	if !p.Redis.Loaded {
		return "  redis: holds no state for the envelope"
	}
	line := fmt.Sprintf("  redis: status %s, %d claims (%d cents), %d packets in the pool",
		p.Redis.Status, p.Redis.Claims, p.Redis.GrabbedCents, p.Redis.Remaining)
	if p.Redis.Reloading {
		line += fmt.Sprintf("; a reload is under way or stopped half-way (%d claims written back, "+
			"the envelope not reopened): either action finishes it", p.Redis.ReloadedClaims)
	}
	return line
}

func (p Plan) effect() string {
	e := p.Envelope
	if p.Blocked != "" {
		return "cannot " + string(p.Action) + " now: " + p.Blocked
	}
	if p.Action == ActionRefund {
		return fmt.Sprintf("refund: refund the %d unclaimed packets (%d cents) to the sender and settle: "+
			"claimed %d + refunded %d = total %d", p.Unclaimed, p.UnclaimedCents,
			e.ClaimedCents, p.UnclaimedCents, e.TotalCents)
	}
	return fmt.Sprintf("reload: offer the %d unclaimed packets (%d cents) again until %s, with the %d claims "+
		"postgres holds (those users get their packet again, never a second one), and reopen the envelope",
		p.Unclaimed, p.UnclaimedCents, e.ExpiresAt.UTC().Format(time.RFC3339), p.Claimed)
}
