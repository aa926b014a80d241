// Package audit checks the service's money invariants against what
// PostgreSQL (and, optionally, Redis) hold now: every envelope's packets add
// up, every cent is claimed or refunded exactly once, statuses agree with the
// money, Redis has not lost grabs PostgreSQL already knows, and the claims
// Redis still answers for a settled envelope are those PostgreSQL paid. It only
// reads; an operator (or the flusher's audit subcommand) decides what to do
// with the report, and Record keeps its outcome for the flushers' metrics.
package audit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"redpacket/internal/envelope"
	"redpacket/internal/redisstore"
)

// DefaultPageSize is how many envelopes one query reads when Options.PageSize
// is not set.
const DefaultPageSize = 500

// Options choose what is audited.
type Options struct {
	// Since limits the audit to envelopes created or settled at or after
	// it, plus every envelope not in a final state (loading, open, sold_out, expired,
	// suspended), which can still change and so is always checked; and to
	// claim_conflicts rows found at or after it. Zero means everything.
	Since time.Time
	// Redis, when set, also checks open and expired envelopes against their
	// Redis state, and settled ones against the claims Redis still holds.
	Redis redis.UniversalClient
	// Keys names the Redis keys (redisstore.NewKeys(prefix, shards)); needed
	// with Redis.
	Keys redisstore.Keys
	// PageSize is the number of envelopes per query; DefaultPageSize if <= 0.
	PageSize int
}

// Violation is one broken invariant.
type Violation struct {
	EnvelopeID int64  `json:"envelope_id"`
	Check      string `json:"check"` // stable short name, e.g. "packet_sum"
	Detail     string `json:"detail"`
}

// Report is the outcome of one audit.
type Report struct {
	Checked    int   // envelopes checked
	Packets    int64 // packets looked at
	Violations []Violation
	// Suspended envelopes wait for an operator's recovery; they are checked in
	// PostgreSQL but not against Redis, and are not violations.
	Suspended []int64
	// Conflicts is the number of claim_conflicts rows in the window; each is
	// also a violation.
	Conflicts int
	Took      time.Duration
}

// OK reports whether no invariant is broken.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Run audits the envelopes Options select, a page at a time, and the claim
// conflicts recorded in the window. An error means the audit could not finish
// (a query failed); broken invariants are in the report, not errors.
func Run(ctx context.Context, pool *pgxpool.Pool, o Options) (Report, error) {
	start := time.Now()
	o, err := o.withDefaults()
	if err != nil {
		return Report{}, err
	}
	var rep Report
	after := int64(math.MinInt64)
	for {
		rows, err := readPage(ctx, pool, o.Since, after, o.PageSize)
		if err != nil {
			return Report{}, err
		}
		if err := checkPage(ctx, pool, o, rows, &rep); err != nil {
			return Report{}, err
		}
		if len(rows) < o.PageSize {
			break
		}
		after = rows[len(rows)-1].ID
	}
	conflicts, err := readConflicts(ctx, pool, o.Since)
	if err != nil {
		return Report{}, err
	}
	rep.Conflicts = len(conflicts)
	rep.Violations = append(rep.Violations, conflicts...)
	orphans, err := readOrphans(ctx, pool, o.Since)
	if err != nil {
		return Report{}, err
	}
	rep.Violations = append(rep.Violations, orphans...)
	rep.Took = time.Since(start)
	return rep, nil
}

func (o Options) withDefaults() (Options, error) {
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.Redis != nil && o.Keys.Shards() <= 0 {
		return o, errors.New("audit: Options.Keys must be built with redisstore.NewKeys when Redis is set")
	}
	return o, nil
}

// checkPage adds one page's envelopes to the report. PostgreSQL was read
// before Redis on purpose: Redis's grabbed_cents only grows and is always
// ahead of what the flusher wrote, so reading it later can only make it look
// further ahead, never falsely behind.
func checkPage(ctx context.Context, pool *pgxpool.Pool, o Options, rows []envelopeRow, rep *Report) error {
	var live map[int64]liveState
	var settled map[int64]Violation
	if o.Redis != nil {
		var err error
		if live, err = readLive(ctx, o.Redis, o.Keys, redisChecked(rows)); err != nil {
			return err
		}
		if settled, err = checkSettledClaims(ctx, pool, o.Redis, o.Keys, rows); err != nil {
			return err
		}
	}
	for _, r := range rows {
		rep.Checked++
		rep.Packets += r.Packets.N
		rep.Violations = append(rep.Violations, checkEnvelope(r)...)
		if r.Status == envelope.StatusSuspended {
			rep.Suspended = append(rep.Suspended, r.ID)
		}
		if l, ok := live[r.ID]; ok {
			rep.Violations = append(rep.Violations, checkRedis(r, l)...)
		}
		if v, ok := settled[r.ID]; ok {
			rep.Violations = append(rep.Violations, v)
		}
	}
	return nil
}

// redisChecked returns the ids of the envelopes whose Redis state must be
// there: open ones (grabs are being answered) and expired ones (closing and
// settlement still read it). Loading envelopes may not be loaded yet, final
// and sold-out ones may have expired from Redis, and suspended ones are known
// to have lost it.
func redisChecked(rows []envelopeRow) []int64 {
	var ids []int64
	for _, r := range rows {
		if r.Status == envelope.StatusOpen || r.Status == envelope.StatusExpired {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

func wrap(what string, err error) error { return fmt.Errorf("audit: %s: %w", what, err) }
