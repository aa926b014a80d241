package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"redpacket/internal/envelope"
)

// The metrics the daemons update on their hot paths. They are package-level,
// so the hot path reaches them without plumbing, but belong to no registry
// until a daemon's registry (Grabber, Flusher) takes them: each daemon serves
// only its own.

// The label values the code can produce, created at zero when the package
// loads so that alerts and rates see every series from the start.
var (
	// GrabResults are the values of redpacket_grabs_total{result}.
	GrabResults = []GrabResult{GrabGranted, GrabRepeat, GrabSoldOut, GrabExpired, GrabNotFound, GrabInvalid,
		GrabLimited, GrabUnavailable, GrabCanceled, GrabNotStarted, GrabNotRecipient, GrabWrongPassword}
	// ConflictReasons are the reasons claim_conflicts records (pgstore's
	// recordConflicts statement).
	ConflictReasons = []string{"unknown_packet", "wrong_envelope", "packet_refunded",
		"user_holds_another_packet", "claimed_by_another_user", "regranted_to_holder", "order_no_in_use"}
	// FinishedStatuses are the final statuses of an envelope.
	FinishedStatuses = []envelope.Status{envelope.StatusSettled, envelope.StatusFailed}
	// WebhookResults are the values of redpacket_webhook_deliveries_total{result}.
	WebhookResults = []WebhookResult{WebhookDelivered, WebhookFailed}
	// SequenceKeys are the id sequences the grabber reserves segments of.
	SequenceKeys = []string{"envelope", "packet"}
	// FlushPhases are the values of redpacket_flush_phase_duration_seconds{phase}.
	FlushPhases = []string{PhaseTake, PhaseLedger, PhaseCheck, PhaseAck}
)

// GrabResult is a grab's outcome, as redpacket_grabs_total{result} counts it.
type GrabResult string

// The outcomes of a grab.
const (
	GrabGranted       GrabResult = "granted"
	GrabRepeat        GrabResult = "repeat"
	GrabSoldOut       GrabResult = "sold_out"
	GrabExpired       GrabResult = "expired"
	GrabNotFound      GrabResult = "not_found"
	GrabInvalid       GrabResult = "invalid"
	GrabLimited       GrabResult = "limited"
	GrabUnavailable   GrabResult = "unavailable"
	GrabCanceled      GrabResult = "canceled" // the caller went away first
	GrabNotStarted    GrabResult = "not_started"
	GrabNotRecipient  GrabResult = "not_recipient"
	GrabWrongPassword GrabResult = "wrong_password"
)

// WebhookResult is a webhook request's outcome, as
// redpacket_webhook_deliveries_total{result} counts it.
type WebhookResult string

// The outcomes of a webhook request.
const (
	WebhookDelivered WebhookResult = "delivered"
	WebhookFailed    WebhookResult = "failed"
)

// The phases of a flushed batch, in order: taking it from Redis; writing and
// committing it in PostgreSQL; setting aside what was refused (in Redis,
// rarely anything) and comparing the envelopes' sums in both (a query and a
// pipeline, to catch Redis state lost); dropping the in-flight batch.
const (
	PhaseTake   = "take"
	PhaseLedger = "ledger"
	PhaseCheck  = "check"
	PhaseAck    = "ack"
)

// Grabber metrics.
var (
	Grabs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redpacket_grabs_total",
		Help: "Grabs answered, by result: granted, repeat, sold_out, expired, not_found, invalid, limited, not_started, " +
			"not_recipient, wrong_password, unavailable, canceled (the caller went away before the answer)."},
		[]string{"result"})
	GrabSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "redpacket_grab_duration_seconds",
		Help:    "Time to answer a grab in the service (Redis round trips included, HTTP excluded).",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18)}) // to 6.6 s: GRAB_WAIT_TIMEOUT is up to 5 s
	SequenceFetches = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redpacket_sequence_fetches_total",
		Help: "Segments of ids reserved from the sequence table or a Redis counter, by key."}, []string{"key"})
	SequenceFetchSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "redpacket_sequence_fetch_duration_seconds", Help: "Time to reserve one segment of ids.",
		Buckets: prometheus.ExponentialBuckets(100e-6, 2, 14)})
)

// Flusher metrics updated in the flusher's process. What settlement and
// operators record in PostgreSQL is read from there (NewLedgerCollector).
var (
	PendingClaims = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "redpacket_pending_claims",
		Help: "Claims waiting in a shard's queue or in flight, read from Redis every settle round."}, []string{"shard"})
	FlushBatchSize = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "redpacket_flush_batch_size",
		Help: "Claims per batch written to PostgreSQL.", Buckets: prometheus.ExponentialBuckets(1, 2, 14)})
	FlushBatchSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "redpacket_flush_batch_duration_seconds", Help: "Time to write one batch: take, commit, ack.",
		Buckets: prometheus.ExponentialBuckets(500e-6, 2, 14)})
	// FlushPhaseSeconds splits a batch's time between Redis and PostgreSQL:
	// which one a slow flusher waits on.
	FlushPhaseSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "redpacket_flush_phase_duration_seconds",
		Help:    "Time of one phase of a batch: take (Redis), ledger (PostgreSQL: write and commit), check (both), ack (Redis).",
		Buckets: prometheus.ExponentialBuckets(100e-6, 2, 16)}, []string{"phase"})
	// FlushBatches counts batches by shard: one shard whose batches stop
	// while the others go on is a stall the totals do not show.
	FlushBatches = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redpacket_flush_batches_total",
		Help: "Batches written to PostgreSQL and acknowledged in Redis, by shard."}, []string{"shard"})
	// FlushLagSeconds reaches past an hour: after a PostgreSQL outage claims
	// wait minutes, and a p99 stuck at the top bucket would say less.
	FlushLagSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "redpacket_flush_lag_seconds",
		Help:    "Time from a grab to the commit that made it durable, per claim.",
		Buckets: prometheus.ExponentialBuckets(1e-3, 2, 23)})
	FlushErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "redpacket_flush_errors_total",
		Help: "Flusher rounds that failed and were retried."})
	Conflicts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redpacket_claim_conflicts_total",
		Help: "Claims PostgreSQL contradicted, recorded in claim_conflicts, by reason."}, []string{"reason"})
	Rejected = prometheus.NewCounter(prometheus.CounterOpts{Name: "redpacket_claims_rejected_total",
		Help: "Queue entries set aside in a shard's rejected list."})
	Suspended = prometheus.NewCounter(prometheus.CounterOpts{Name: "redpacket_envelopes_suspended_total",
		Help: "Envelopes this flusher suspended because Redis lost part of their state."})
	WebhookDeliveries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redpacket_webhook_deliveries_total",
		Help: "Webhook requests by result: delivered (answered 2xx) or failed (any other answer, or none; retried)."},
		[]string{"result"})
	EventsPruned = prometheus.NewCounter(prometheus.CounterOpts{Name: "redpacket_events_pruned_total",
		Help: "Events deleted by the retention."})
)

func init() {
	for _, v := range GrabResults {
		Grabs.WithLabelValues(string(v))
	}
	for _, v := range SequenceKeys {
		SequenceFetches.WithLabelValues(v)
	}
	for _, v := range ConflictReasons {
		Conflicts.WithLabelValues(v)
	}
	for _, v := range WebhookResults {
		WebhookDeliveries.WithLabelValues(string(v))
	}
	for _, v := range FlushPhases {
		FlushPhaseSeconds.WithLabelValues(v)
	}
}

func grabberCollectors() []prometheus.Collector {
	return []prometheus.Collector{Grabs, GrabSeconds, SequenceFetches, SequenceFetchSeconds, httpRequests, httpSeconds}
}

func flusherCollectors() []prometheus.Collector {
	return []prometheus.Collector{PendingClaims, FlushBatches, FlushBatchSize, FlushBatchSeconds, FlushPhaseSeconds, FlushLagSeconds, FlushErrors,
		Conflicts, Rejected, Suspended, WebhookDeliveries, EventsPruned}
}
