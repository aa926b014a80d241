package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"redpacket/internal/config"
	"redpacket/internal/daemon"
	"redpacket/internal/events"
	"redpacket/internal/pgstore"
)

// startEvents starts the flusher's share of the events in g, until ctx
// ends: the retention, and, when WEBHOOK_URL is set, the webhook sender
// with a listener that wakes it as events commit (the sender finishes the
// requests in flight, each bounded by WEBHOOK_TIMEOUT and by half of
// SHUTDOWN_TIMEOUT from the stop). The sender's pool is
// closed by cleanups.
func startEvents(ctx context.Context, g *errgroup.Group, cleanups *daemon.Cleanups, cfg config.Config, ev config.Events,
	pg *pgstore.Store, log *zap.Logger) error {
	changed, err := pg.RecordWebhooks(ctx, ev.WebhookEnabled())
	if err != nil {
		return err
	}
	if changed {
		// Not refused: turning webhooks on or off is a restart of every
		// flusher. Flushers that disagree lose events, which is worth a
		// line at start.
		log.Warn("WEBHOOK_URL differs from the flusher started before this one (webhooks were recorded "+
			map[bool]string{true: "off", false: "on"}[ev.WebhookEnabled()]+"): every flusher must have the same; "+
			"a flusher without it prunes events its receiver has not accepted",
			zap.Bool("webhooks", ev.WebhookEnabled()))
	}
	before, err := pg.RecordEventsRetention(ctx, ev.Retention)
	if err != nil {
		return err
	}
	if before > 0 {
		log.Warn("EVENTS_RETENTION differs from the flusher started before this one: every flusher must have the same "+
			"(flusher retention keeps the last one recorded)", zap.Duration("events_retention", ev.Retention),
			zap.Duration("recorded_before", before))
	}
	retention := &events.Retention{Store: pg, Age: ev.Retention, DeliveredOnly: ev.WebhookEnabled(), Log: log}
	g.Go(func() error { return retention.Run(ctx) })
	if !ev.WebhookEnabled() {
		return nil
	}
	// The sender keeps a connection per request in flight (it holds the
	// event's row lock meanwhile), so it gets a pool of its own: receivers
	// that hang must not take the connections claims are written with.
	pc, err := pgstore.PoolConfig(cfg.DatabaseURL, 0)
	if err != nil {
		return fmt.Errorf("webhook pool: %w", err)
	}
	pc.MaxConns = int32(ev.WebhookWorkers) + 1
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("webhook pool: %w", err)
	}
	cleanups.AddClose("webhook pool", pool.Close)
	listener := events.NewListener(cfg.DatabaseURL, log)
	webhook := events.NewWebhook(pgstore.New(pool), listener, events.WebhookConfig{
		URL: ev.WebhookURL, Keys: ev.WebhookKeys, Timeout: ev.WebhookTimeout,
		MaxBackoff: ev.WebhookMaxBackoff, Workers: ev.WebhookWorkers, StopGrace: cfg.ShutdownTimeout / 2,
	}, log)
	g.Go(func() error { return listener.Run(ctx) })
	g.Go(func() error { return webhook.Run(ctx) })
	return nil
}
