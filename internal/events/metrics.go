package events

import "redpacket/internal/telemetry"

// The flusher's event metrics (telemetry.Flusher serves them).
var (
	deliveries = telemetry.WebhookDeliveries
	pruned     = telemetry.EventsPruned
)
