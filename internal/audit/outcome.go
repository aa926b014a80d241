package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/db/dbsqlc"
)

// Exit statuses of `flusher audit`, for cron jobs and monitors.
const (
	ExitOK        = 0 // every invariant holds and no envelope is suspended
	ExitViolation = 1 // an invariant is broken (whatever else is true)
	ExitFailed    = 2 // the audit could not run (bad flags, a server down)
	ExitSuspended = 3 // no violation, but envelopes are suspended and wait for an operator
)

// ExitCode is the exit status the report calls for: a violation outranks a
// suspension, which is not a violation but still needs an operator.
func (r Report) ExitCode() int {
	switch {
	case !r.OK():
		return ExitViolation
	case len(r.Suspended) > 0:
		return ExitSuspended
	}
	return ExitOK
}

// Record keeps the report's outcome in audit_last_run, which the flushers
// export as metrics (redpacket_audit_violations,
// redpacket_audit_last_run_timestamp_seconds), so an alert sees what a cron
// job found. all tells whether every envelope was read (-all) or a window.
func Record(ctx context.Context, pool *pgxpool.Pool, r Report, finished time.Time, all bool) error {
	err := dbsqlc.New(pool).RecordAudit(ctx, dbsqlc.RecordAuditParams{FinishedAt: finished,
		Violations: int32(len(r.Violations)), Suspended: int32(len(r.Suspended)), Envelopes: int32(r.Checked),
		AllEnvelopes: all})
	if err != nil {
		return fmt.Errorf("audit: record the outcome: %w", err)
	}
	return nil
}
