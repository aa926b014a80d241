package events

import (
	"github.com/prometheus/client_golang/prometheus"

	"redpacket/internal/telemetry"
)

var (
	deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "redpacket_webhook_deliveries_total",
		Help: "Webhook requests by result: delivered (answered 2xx) or failed (any other answer, or none; retried).",
	}, []string{"result"})
	pruned = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "redpacket_events_pruned_total",
		Help: "Events deleted by the retention.",
	})
)

func init() {
	telemetry.Registry.MustRegister(deliveries, pruned)
}
