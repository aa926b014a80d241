package telemetry

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry holds every metric of the process; MetricsHandler serves it.
// The metrics are package-level: each daemon is one process with one set,
// and the hot path reaches them without plumbing.
var Registry = prometheus.NewRegistry()

func init() {
	Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// Grabber metrics.
var (
	Grabs = counterVec("redpacket_grabs_total",
		"Grabs answered, by result: granted, repeat, sold_out, expired, not_found, invalid, unavailable.", "result")
	GrabSeconds = histogram("redpacket_grab_duration_seconds",
		"Time to answer a grab in the service (Redis round trips included, HTTP excluded).",
		prometheus.ExponentialBuckets(50e-6, 2, 14))
	SequenceFetches = counterVec("redpacket_sequence_fetches_total",
		"Segments of ids reserved from the sequence table or a Redis counter, by key.", "key")
	SequenceFetchSeconds = histogram("redpacket_sequence_fetch_duration_seconds",
		"Time to reserve one segment of ids.", prometheus.ExponentialBuckets(100e-6, 2, 14))
)

// Flusher metrics.
var (
	PendingClaims = gaugeVec("redpacket_pending_claims",
		"Claims waiting in a shard's queue or in flight, read every settle round.", "shard")
	FlushBatchSize = histogram("redpacket_flush_batch_size", "Claims per batch written to PostgreSQL.",
		prometheus.ExponentialBuckets(1, 2, 14))
	FlushBatchSeconds = histogram("redpacket_flush_batch_duration_seconds",
		"Time to write one batch: take, commit, ack.", prometheus.ExponentialBuckets(500e-6, 2, 14))
	FlushLagSeconds = histogram("redpacket_flush_lag_seconds",
		"Time from a grab to the commit that made it durable, per claim.", prometheus.ExponentialBuckets(1e-3, 2, 14))
	FlushErrors = counter("redpacket_flush_errors_total", "Flusher rounds that failed and were retried.")
	Conflicts   = counterVec("redpacket_claim_conflicts_total",
		"Claims PostgreSQL contradicted, recorded in claim_conflicts, by reason.", "reason")
	Rejected  = counter("redpacket_claims_rejected_total", "Queue entries set aside in a shard's rejected list.")
	Suspended = counter("redpacket_envelopes_suspended_total",
		"Envelopes suspended because Redis lost part of their state.")
	Finished = counterVec("redpacket_envelopes_finished_total",
		"Envelopes settled (status settled) or given up (status failed).", "status")
	RefundedCents = counter("redpacket_refunded_cents_total", "Cents refunded to senders at settlement.")
)

// MetricsHandler serves the registry in the Prometheus text format.
func MetricsHandler() http.Handler {
	return promhttp.HandlerFor(Registry, promhttp.HandlerOpts{Registry: Registry})
}

func counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	Registry.MustRegister(c)
	return c
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	Registry.MustRegister(c)
	return c
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	Registry.MustRegister(g)
	return g
}

func histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	Registry.MustRegister(h)
	return h
}
