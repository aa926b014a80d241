package main

import (
	"context"

	"redpacket/internal/config"
	"redpacket/internal/daemon"
	"redpacket/internal/pgstore"
	"redpacket/internal/telemetry"
)

// registerMetrics adds to the flusher's registry what needs its clients: each
// server's readiness, how full Redis is, and what PostgreSQL records that
// several processes change (settlements, suspensions, the last audit, the
// webhook backlog).
func registerMetrics(c *daemon.Clients, ev config.Events) {
	pg := pgstore.New(c.PG)
	webhooks := ev.WebhookEnabled()
	telemetry.Flusher.MustRegister(
		telemetry.NewDependencyCollector(c.Checks()),
		telemetry.NewRedisMemoryCollector(c.RedisMemory),
		telemetry.NewLedgerCollector(func(ctx context.Context) (telemetry.Ledger, error) {
			return pg.Ledger(ctx, webhooks)
		}),
	)
}
