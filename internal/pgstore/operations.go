package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/envelope"
	"redpacket/internal/telemetry"
)

// webhookPendingCap bounds the count of undelivered events: while a receiver
// is down the backlog can hold millions, and a scrape must stay cheap.
const webhookPendingCap = 100000

// Ledger reads what the flushers export from PostgreSQL: settlement totals,
// the envelopes suspended now, the oldest overdue settlement, the last audit
// and, with webhooks, the undelivered events. Every query is served by an index or a tiny table.
func (s *Store) Ledger(ctx context.Context, webhooks bool) (telemetry.Ledger, error) {
	l := telemetry.Ledger{Finished: map[envelope.Status]telemetry.Finished{}}
	totals, err := s.q.SettlementTotals(ctx)
	if err != nil {
		return l, fmt.Errorf("read settlement totals: %w", err)
	}
	for _, t := range totals {
		l.Finished[envelope.Status(t.Status)] = telemetry.Finished{Envelopes: t.Envelopes, ClaimedCents: t.ClaimedCents, RefundedCents: t.RefundedCents}
	}
	if l.Suspended, err = s.q.CountSuspended(ctx); err != nil {
		return l, fmt.Errorf("count suspended envelopes: %w", err)
	}
	overdue, err := s.q.SettlementOverdueSeconds(ctx)
	if err != nil {
		return l, fmt.Errorf("read the oldest overdue settlement: %w", err)
	}
	l.SettlementOverdue = time.Duration(overdue * float64(time.Second))
	last, err := s.q.LastAudit(ctx)
	switch {
	case err == nil:
		l.Audit.FinishedAt, l.Audit.Violations = last.FinishedAt, int64(last.Violations)
	case !errors.Is(err, pgx.ErrNoRows):
		return l, fmt.Errorf("read the last audit: %w", err)
	}
	if webhooks {
		if l.WebhookPending, err = s.q.CountUndeliveredEvents(ctx, webhookPendingCap); err != nil {
			return l, fmt.Errorf("count undelivered events: %w", err)
		}
	}
	return l, nil
}
