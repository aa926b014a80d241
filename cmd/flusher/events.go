package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
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
func startEvents(ctx context.Context, cfg config.Config, ev config.Events, pg *pgstore.Store, log *zap.Logger) (
	wait func(), err error) {
	var wg sync.WaitGroup
	retention := &events.Retention{Store: pg, Age: ev.Retention, DeliveredOnly: ev.WebhookEnabled(), Log: log}
	if !ev.WebhookEnabled() {
		wg.Go(func() { retention.Run(ctx) })
		return wg.Wait, nil
	}
	// The sender keeps a connection per request in flight (it holds the
	// event's row lock meanwhile), so it gets a pool of its own: receivers
	// that hang must not take the connections claims are written with.
	pc, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("webhook pool: %w", err)
	}
	pc.MaxConns = int32(ev.WebhookWorkers) + 1
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("webhook pool: %w", err)
	}
	listener := events.NewListener(cfg.DatabaseURL, log)
	webhook := events.NewWebhook(pgstore.New(pool), listener, events.WebhookConfig{
		URL: ev.WebhookURL, Keys: ev.WebhookKeys, Timeout: ev.WebhookTimeout,
		MaxBackoff: ev.WebhookMaxBackoff, Workers: ev.WebhookWorkers,
	}, log)
	wg.Go(func() { retention.Run(ctx) })
	wg.Go(func() { listener.Run(ctx) })
	wg.Go(func() { webhook.Run(ctx) })
	return func() { wg.Wait(); pool.Close() }, nil
}
