package telemetry

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"redpacket/internal/envelope"
)

// scrapeTimeout bounds what a scrape waits for a dependency or a query.
const scrapeTimeout = 2 * time.Second

// Check reports whether a dependency answers.
type Check func(ctx context.Context) error

var dependencyUp = prometheus.NewDesc("redpacket_dependency_up",
	"1 when the dependency answered a ping at this scrape (within 2 s), else 0.", []string{"dependency"}, nil)

type dependencies map[string]Check

// NewDependencyCollector exports redpacket_dependency_up{dependency}: each
// check (say "postgres", "redis") runs at every scrape, all at once.
func NewDependencyCollector(checks map[string]Check) prometheus.Collector {
	return dependencies(checks)
}

func (d dependencies) Describe(ch chan<- *prometheus.Desc) { ch <- dependencyUp }

func (d dependencies) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for name, check := range d {
		wg.Go(func() {
			up := 0.0
			if check(ctx) == nil {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(dependencyUp, prometheus.GaugeValue, up, name)
		})
	}
	wg.Wait()
}

// Ledger is what PostgreSQL records that several processes change: every
// settlement, whether a flusher or an operator's `flusher recover` made it,
// the envelopes suspended now, the webhook backlog and the last audit.
type Ledger struct {
	Finished       map[envelope.Status]Finished // by final status (FinishedStatuses)
	Suspended      int64                        // envelopes suspended now
	WebhookPending int64                        // undelivered events (counted up to a cap); 0 without webhooks
	Audit          AuditRun
	// SettlementOverdue is how long ago the oldest envelope still waiting
	// for its settlement (not suspended) expired; 0 when none has.
	SettlementOverdue time.Duration
}

// Finished are the totals of the envelopes that reached one final status.
// The cents are floats, as the metrics hold them: running totals for the
// life of the service may pass int64's range (settlement_totals is numeric).
type Finished struct {
	Envelopes     int64
	ClaimedCents  float64
	RefundedCents float64
}

// AuditRun is the outcome of the last `flusher audit`; zero if none ran.
type AuditRun struct {
	FinishedAt time.Time
	Violations int64
}

var (
	finishedDesc = prometheus.NewDesc("redpacket_envelopes_finished_total",
		"Envelopes settled (status settled) or given up (status failed), by whoever settled them, from PostgreSQL.",
		[]string{"status"}, nil)
	refundedDesc = prometheus.NewDesc("redpacket_refunded_cents_total",
		"Cents refunded to senders at settlement, by whoever settled (a flusher or flusher recover), from PostgreSQL.",
		nil, nil)
	settledDesc = prometheus.NewDesc("redpacket_settled_cents_total",
		"Cents users hold in envelopes that were settled (paid out), from PostgreSQL.", nil, nil)
	suspendedDesc = prometheus.NewDesc("redpacket_suspended_envelopes",
		"Envelopes suspended now, waiting for an operator's flusher recover, from PostgreSQL.", nil, nil)
	webhookPendingDesc = prometheus.NewDesc("redpacket_webhook_pending_events",
		"Events the webhook receiver has not accepted yet (counted up to 100000); 0 without WEBHOOK_URL.", nil, nil)
	auditAtDesc = prometheus.NewDesc("redpacket_audit_last_run_timestamp_seconds",
		"When the last flusher audit finished (Unix time); 0 if none has run.", nil, nil)
	auditViolationsDesc = prometheus.NewDesc("redpacket_audit_violations",
		"Violations the last flusher audit found.", nil, nil)
	overdueDesc = prometheus.NewDesc("redpacket_settlement_overdue_seconds",
		"How long ago the oldest envelope not yet settled expired (0 when none has; suspended envelopes are "+
			"counted apart), from PostgreSQL: its refund waits as long.", nil, nil)
)

type ledgerCollector struct {
	read func(context.Context) (Ledger, error)

	mu   sync.Mutex
	last Ledger // the last read that succeeded
}

// NewLedgerCollector exports the Ledger that read returns, read at every
// scrape. The figures are PostgreSQL's, not this process's: every flusher
// exports the same values, so aggregate them with max, not sum. A read that
// fails (PostgreSQL down) exports the last values read, zeros before any.
func NewLedgerCollector(read func(context.Context) (Ledger, error)) prometheus.Collector {
	return &ledgerCollector{read: read}
}

func (c *ledgerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{finishedDesc, refundedDesc, settledDesc, suspendedDesc,
		webhookPendingDesc, auditAtDesc, auditViolationsDesc, overdueDesc} {
		ch <- d
	}
}

func (c *ledgerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	l, err := c.read(ctx)
	c.mu.Lock()
	if err == nil {
		c.last = l
	} else {
		l = c.last
	}
	c.mu.Unlock()

	var refunded, settled float64
	for _, s := range FinishedStatuses {
		f := l.Finished[s]
		refunded += f.RefundedCents
		if s == envelope.StatusSettled {
			settled += f.ClaimedCents
		}
		ch <- prometheus.MustNewConstMetric(finishedDesc, prometheus.CounterValue, float64(f.Envelopes), string(s))
	}
	ch <- prometheus.MustNewConstMetric(refundedDesc, prometheus.CounterValue, refunded)
	ch <- prometheus.MustNewConstMetric(settledDesc, prometheus.CounterValue, settled)
	ch <- prometheus.MustNewConstMetric(suspendedDesc, prometheus.GaugeValue, float64(l.Suspended))
	ch <- prometheus.MustNewConstMetric(webhookPendingDesc, prometheus.GaugeValue, float64(l.WebhookPending))
	at := 0.0
	if !l.Audit.FinishedAt.IsZero() {
		at = float64(l.Audit.FinishedAt.UnixMilli()) / 1000
	}
	ch <- prometheus.MustNewConstMetric(auditAtDesc, prometheus.GaugeValue, at)
	ch <- prometheus.MustNewConstMetric(auditViolationsDesc, prometheus.GaugeValue, float64(l.Audit.Violations))
	ch <- prometheus.MustNewConstMetric(overdueDesc, prometheus.GaugeValue, l.SettlementOverdue.Seconds())
}

var redisMemory = prometheus.NewDesc("redpacket_redis_memory_used_ratio",
	"The fullest Redis master's used_memory over its maxmemory at this scrape, of the masters that answered "+
		"(0 without maxmemory; absent when none answered). used_memory counts replication and AOF buffers, "+
		"which Redis leaves out when it refuses writes: it can pass 1 before anything is refused.", nil, nil)

// NewRedisMemoryCollector exports redpacket_redis_memory_used_ratio, read
// at every scrape: a Redis that reaches maxmemory refuses grabs and creates
// (noeviction), and its ping still answers, so readiness does not show it.
func NewRedisMemoryCollector(read func(context.Context) (float64, error)) prometheus.Collector {
	return redisMemoryCollector(read)
}

type redisMemoryCollector func(context.Context) (float64, error)

func (c redisMemoryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- redisMemory }

func (c redisMemoryCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if ratio, err := c(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(redisMemory, prometheus.GaugeValue, ratio)
	}
}
