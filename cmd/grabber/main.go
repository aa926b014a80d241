// Command grabber serves the red-packet HTTP API: create envelopes, grab
// packets, report status. Settings come from the environment (see README).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
	_ "time/tzdata" // ID_TIME_ZONE works on images without a zone database

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"redpacket/internal/apikey"
	"redpacket/internal/config"
	"redpacket/internal/daemon"
	"redpacket/internal/events"
	"redpacket/internal/grab"
	"redpacket/internal/httpapi"
	"redpacket/internal/ids"
	"redpacket/internal/limits"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/sequence"
	"redpacket/internal/telemetry"
)

const usage = `usage: grabber [-h] [-version]

Serves the red-packet HTTP API on GRABBER_ADDR until SIGINT or SIGTERM.

  -h, -help   print this and exit
  -version    print the version and commit, and exit

Settings come from the environment (the README tells more of each):
`

func main() {
	exitIfHealthcheck(os.Args[1:])
	os.Exit(run(os.Args[1:]))
}

// run returns the exit status: 0, 1 when the grabber failed, 2 for a
// command line or a setting it refuses.
func run(args []string) int {
	fs := flag.NewFlagSet("grabber", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the usage below says it all
	version := fs.Bool("version", false, "")
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		writeUsage(os.Stdout)
		return 0
	case err != nil:
		fmt.Fprintln(os.Stderr, "grabber:", err)
		writeUsage(os.Stderr)
		return 2
	case fs.NArg() > 0:
		fmt.Fprintf(os.Stderr, "grabber: unexpected argument %q\n", fs.Arg(0))
		writeUsage(os.Stderr)
		return 2
	case *version:
		fmt.Println(daemon.Version("grabber"))
		return 0
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		telemetry.LogFailure("grabber", nil, "grabber refused its settings", err)
		return 2
	}
	log, err := telemetry.NewLogger("grabber", cfg.LogLevel)
	if err != nil {
		telemetry.LogFailure("grabber", nil, "grabber refused its settings", err)
		return 2
	}
	defer log.Sync() //nolint:errcheck
	if err := serve(cfg, log); err != nil {
		telemetry.LogFailure("grabber", log, "grabber stopped", err)
		return 1
	}
	log.Info("grabber stopped")
	return 0
}

func writeUsage(w io.Writer) {
	fmt.Fprint(w, usage)
	_ = config.WriteSettings(w, config.Grabber)
}

// lockTimeout bounds how long a grabber's statement waits on a lock: behind
// a DBA's ALTER TABLE, a create or read answers 503 within it rather than
// holding its request, and one of the few connections grabs need for new
// order numbers, for as long as the lock is held.
const lockTimeout = 5 * time.Second

// serve runs the grabber until a signal, or until a part of it cannot go
// on: the servers and background loops run in one errgroup, so one failing
// stops the others; then the cleanups close what was opened, last first,
// within SHUTDOWN_TIMEOUT of the stop.
func serve(cfg config.Config, log *zap.Logger) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer daemon.StopSignals(stop)
	g, gctx := errgroup.WithContext(ctx)
	deadline := daemon.ShutdownDeadline(gctx, cfg.ShutdownTimeout)
	var cleanups daemon.Cleanups
	defer func() { err = errors.Join(err, cleanups.Run(log, deadline())) }()

	clients, err := daemon.Open(ctx, config.Grabber, cfg, log, lockTimeout)
	if err != nil {
		return daemon.StartErr(ctx, err)
	}
	cleanups.AddClose("postgres and redis clients", clients.Close)
	telemetry.Grabber.MustRegister(telemetry.NewDependencyCollector(clients.Checks()))

	svc, pg := newService(cfg, clients, log, &cleanups)
	// The keys are read before any goroutine starts: a grabber that cannot
	// read them returns at once, leaving nothing running behind it.
	var keys *apikey.Keyring
	if cfg.GrabberAuth == config.AuthKeys {
		if keys, err = openKeyring(ctx, clients, log); err != nil {
			return daemon.StartErr(ctx, err)
		}
		g.Go(func() error { return keys.Run(gctx) })
		// Run ends at the signal; the uses of the requests answered after
		// it are written once the servers have stopped.
		cleanups.Add("api key last use", keys.Flush)
	}
	// One LISTEN connection wakes every long poll of GET /v1/events; it
	// stops with the others, which ends the polls still waiting.
	listener := events.NewListener(cfg.DatabaseURL, log)
	g.Go(func() error { return listener.Run(gctx) })
	opts := httpapi.Options{Token: cfg.GrabberAPIToken, AccessLog: cfg.AccessLog, NoMetrics: cfg.MetricsAddr != "",
		Ready: clients.Ready, Log: log, Events: events.NewFeed(pg, listener)}
	if keys != nil { // a nil *Keyring in the interface would not be a nil Keys
		opts.Keys = keys
	}
	srv := daemon.NewServer(httpapi.New(svc, opts), log, daemon.DefaultLimits(cfg.GrabberMaxConns))
	log.Info("grabber starting", zap.String("version", daemon.Version("grabber")), zap.Int("shards", clients.Shards), zap.String("prefix", cfg.RedisKeyPrefix),
		zap.String("auth", string(cfg.GrabberAuth)), zap.Bool("access_log", cfg.AccessLog),
		zap.Bool("redis_cluster", len(cfg.RedisClusterAddrs) > 0))
	// Serve returns once every request in hand has been answered; only then
	// do the cleanups close the allocators and clients.
	g.Go(func() error { return daemon.Serve(gctx, log, srv, cfg.GrabberAddr, cfg.ShutdownTimeout) })
	if cfg.MetricsAddr != "" {
		// A metrics listener that cannot serve stops the grabber rather
		// than let it run unseen.
		metrics := daemon.NewServer(httpapi.NewMetrics(telemetry.Grabber.Handler(), log), log, daemon.DefaultLimits(metricsMaxConns))
		g.Go(func() error { return daemon.Serve(gctx, log, metrics, cfg.MetricsAddr, cfg.ShutdownTimeout) })
	}
	return g.Wait()
}

// newService builds the grab service over the clients; what it starts is
// stopped by cleanups, after the servers (added later) have answered the
// requests in hand.
func newService(cfg config.Config, clients *daemon.Clients, log *zap.Logger, cleanups *daemon.Cleanups) (*grab.Service, *pgstore.Store) {
	seqOpts := sequence.Options{OnFetch: func(key string, _ int64, took time.Duration) {
		telemetry.SequenceFetches.WithLabelValues(key).Inc()
		telemetry.SequenceFetchSeconds.Observe(took.Seconds())
	}}
	envOpts := seqOpts
	envOpts.MaxAge = grab.EnvelopeIDMaxAge
	envIDs := sequence.New(clients.PG, "envelope", envOpts)
	cleanups.AddClose("envelope id allocator", envIDs.Close)
	packetIDs := sequence.New(clients.PG, "packet", seqOpts)
	cleanups.AddClose("packet id allocator", packetIDs.Close)

	rs := redisstore.New(clients.Redis, cfg.RedisKeyPrefix, clients.Shards)
	pg := pgstore.New(clients.PG)
	// The grab script numbers grants from ceilings reserved in PostgreSQL.
	orderNos := ids.NewOrderNumbers(rs, pg, ids.OrderConfig{
		Width: cfg.OrderNoWidth, Step: cfg.OrderNoSegment, Location: cfg.IDLocation, Log: log,
	})
	cleanups.AddClose("order numbers", orderNos.Close)
	// Grabs that arrive together share round trips.
	rs.WaitForReplicas(cfg.GrabWaitReplicas, cfg.GrabWaitTimeout)
	cleanups.AddClose("grab coalescing", rs.Coalesce(cfg.GrabWorkers, cfg.GrabBatchMax))

	return grab.New(grab.Config{
		PG:        pg,
		Redis:     rs,
		EnvIDs:    envIDs,
		PacketIDs: packetIDs,
		Shares:    ids.NewShareCodes(clients.Redis, rs.Keys(), ids.ShareConfig{Location: cfg.IDLocation}),
		ShortIDs: ids.NewShortIDs(clients.Redis, rs.Keys(), clients.PG, ids.ShortIDConfig{
			Min: cfg.ShortIDMin, Max: cfg.ShortIDMax,
		}),
		Limits: cfg.Limits,
		Safety: grab.Safety{IdempotencyTTL: cfg.IdempotencyTTL, Limiter: limits.New(clients.Redis, rs.Keys(), limits.Config{
			UserGrabRate: cfg.UserGrabRate, UserDailyGrabs: cfg.UserDailyGrabs, SenderDailyCents: cfg.SenderDailyCents,
			Location: cfg.IDLocation,
		})},
		Log: log,
	}), pg
}

// openKeyring reads the active API keys; its Run keeps them current.
func openKeyring(ctx context.Context, clients *daemon.Clients, log *zap.Logger) (*apikey.Keyring, error) {
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	keys, err := apikey.Open(startCtx, clients.PG, apikey.Options{Log: log})
	if err != nil {
		return nil, err
	}
	if keys.Len() == 0 {
		log.Warn("GRABBER_AUTH=keys and no active API key: every /v1/ request is refused until one is made (flusher apikey create)")
	}
	return keys, nil
}

// metricsMaxConns caps the connections of the metrics listener: a few
// scrapers.
const metricsMaxConns = 16
