package main

import (
	"context"
	"sync"

	"go.uber.org/zap"

	"redpacket/internal/config"
	"redpacket/internal/events"
	"redpacket/internal/pgstore"
)

// startEvents runs the flusher's share of the events until ctx ends: the
// retention, and, when WEBHOOK_URL is set, the webhook sender with a
// listener that wakes it as events commit. wait returns once all of it has
// stopped (the sender finishes the requests in flight, each bounded by
// WEBHOOK_TIMEOUT).
func startEvents(ctx context.Context, cfg config.Config, ev config.Events, pg *pgstore.Store, log *zap.Logger) (wait func()) {
	var wg sync.WaitGroup
	retention := &events.Retention{Store: pg, Age: ev.Retention, DeliveredOnly: ev.WebhookEnabled(), Log: log}
	wg.Go(func() { retention.Run(ctx) })
	if ev.WebhookEnabled() {
		listener := events.NewListener(cfg.DatabaseURL, log)
		wg.Go(func() { listener.Run(ctx) })
		webhook := events.NewWebhook(pg, listener, events.WebhookConfig{
			URL: ev.WebhookURL, Secret: []byte(ev.WebhookSecret), Timeout: ev.WebhookTimeout,
			MaxBackoff: ev.WebhookMaxBackoff, Workers: ev.WebhookWorkers,
		}, log)
		wg.Go(func() { webhook.Run(ctx) })
	}
	return wg.Wait
}
