// Command grabber serves the red-packet HTTP API: create envelopes, grab
// packets, report status. Settings come from the environment (see README).
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
	_ "time/tzdata" // ID_TIME_ZONE works on images without a zone database

	"go.uber.org/zap"

	"redpacket/internal/config"
	"redpacket/internal/daemon"
	"redpacket/internal/events"
	"redpacket/internal/grab"
	"redpacket/internal/httpapi"
	"redpacket/internal/ids"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/sequence"
	"redpacket/internal/telemetry"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "grabber:", err)
		os.Exit(1)
	}
}

func run() error {
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return err
	}
	log, err := telemetry.NewLogger("grabber", cfg.LogLevel)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	clients, err := daemon.Connect(startCtx, cfg)
	cancel()
	if err != nil {
		return err
	}
	defer clients.Close()

	seqOpts := sequence.Options{OnFetch: func(key string, _ int64, took time.Duration) {
		telemetry.SequenceFetches.WithLabelValues(key).Inc()
		telemetry.SequenceFetchSeconds.Observe(took.Seconds())
	}}
	envIDs := sequence.New(clients.PG, "envelope", seqOpts)
	defer envIDs.Close()
	packetIDs := sequence.New(clients.PG, "packet", seqOpts)
	defer packetIDs.Close()

	rs := redisstore.New(clients.Redis, cfg.RedisKeyPrefix, clients.Shards)
	// Grabs that arrive together share round trips; stopped (deferred) before
	// the clients close, after the server has answered everything in hand.
	rs.WaitForReplicas(cfg.GrabWaitReplicas, cfg.GrabWaitTimeout)
	defer rs.Coalesce(cfg.GrabWorkers, cfg.GrabBatchMax)()
	pg := pgstore.New(clients.PG)
	orderNos := ids.NewOrderNumbers(clients.Redis, rs.Keys(), ids.OrderConfig{
		Width: cfg.OrderNoWidth, Segment: cfg.OrderNoSegment, Location: cfg.IDLocation, Floor: pg.MaxOrderSeq,
	})
	defer orderNos.Close()

	svc := grab.New(grab.Config{
		PG:        pg,
		Redis:     rs,
		EnvIDs:    envIDs,
		PacketIDs: packetIDs,
		OrderNos:  orderNos,
		Shares:    ids.NewShareCodes(clients.Redis, rs.Keys(), ids.ShareConfig{Location: cfg.IDLocation}),
		ShortIDs: ids.NewShortIDs(clients.Redis, rs.Keys(), clients.PG, ids.ShortIDConfig{
			Min: cfg.ShortIDMin, Max: cfg.ShortIDMax,
		}),
		Limits: cfg.Limits,
		Log:    log,
	})
	// One LISTEN connection wakes every long poll of GET /v1/events; it
	// stops with the signal, which ends the polls still waiting.
	listener := events.NewListener(cfg.DatabaseURL, log)
	listenCtx, stopListening := context.WithCancel(ctx)
	go listener.Run(listenCtx)
	defer func() { stopListening(); <-listener.Done() }()

	api := httpapi.New(svc, httpapi.Options{Token: cfg.GrabberAPIToken, Ready: clients.Ready, Log: log,
		Events: events.NewFeed(pg, listener)})
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          zap.NewStdLog(log),
	}
	log.Info("grabber starting", zap.Int("shards", clients.Shards), zap.String("prefix", cfg.RedisKeyPrefix),
		zap.Bool("auth", cfg.GrabberAPIToken != ""), zap.Bool("redis_cluster", len(cfg.RedisClusterAddrs) > 0))
	// Serve returns once every request in hand has been answered; only then
	// are the allocators and clients closed (deferred above).
	err = daemon.Serve(ctx, log, srv, cfg.GrabberAddr, cfg.ShutdownTimeout)
	log.Info("grabber stopped", zap.Error(err))
	return err
}
