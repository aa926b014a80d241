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
		fmt.Fprintln(os.Stderr, "grabber:", err)
		return 2
	}
	if err := serve(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "grabber:", err)
		return 1
	}
	return 0
}

func writeUsage(w io.Writer) {
	fmt.Fprint(w, usage)
	_ = config.WriteSettings(w, config.Grabber)
}

func serve(cfg config.Config) error {
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
	telemetry.Grabber.MustRegister(telemetry.NewDependencyCollector(clients.Checks()))

	seqOpts := sequence.Options{OnFetch: func(key string, _ int64, took time.Duration) {
		telemetry.SequenceFetches.WithLabelValues(key).Inc()
		telemetry.SequenceFetchSeconds.Observe(took.Seconds())
	}}
	envIDs := sequence.New(clients.PG, "envelope", seqOpts)
	defer envIDs.Close()
	packetIDs := sequence.New(clients.PG, "packet", seqOpts)
	defer packetIDs.Close()

	rs := redisstore.New(clients.Redis, cfg.RedisKeyPrefix, clients.Shards)
	pg := pgstore.New(clients.PG)
	// The grab script numbers grants from ceilings reserved in PostgreSQL;
	// closed (deferred) after the grabs in hand are answered.
	orderNos := ids.NewOrderNumbers(rs, pg, ids.OrderConfig{
		Width: cfg.OrderNoWidth, Step: cfg.OrderNoSegment, Location: cfg.IDLocation, Log: log,
	})
	defer orderNos.Close()
	// Grabs that arrive together share round trips; stopped (deferred) before
	// the clients close, after the server has answered everything in hand.
	rs.WaitForReplicas(cfg.GrabWaitReplicas, cfg.GrabWaitTimeout)
	defer rs.Coalesce(cfg.GrabWorkers, cfg.GrabBatchMax)()

	svc := grab.New(grab.Config{
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
	})
	// One LISTEN connection wakes every long poll of GET /v1/events; it
	// stops with the signal, which ends the polls still waiting.
	listener := events.NewListener(cfg.DatabaseURL, log)
	listenCtx, stopListening := context.WithCancel(ctx)
	go listener.Run(listenCtx)
	defer func() { stopListening(); <-listener.Done() }()

	opts := httpapi.Options{Token: cfg.GrabberAPIToken, AccessLog: cfg.AccessLog, NoMetrics: cfg.MetricsAddr != "",
		Ready: clients.Ready, Log: log, Events: events.NewFeed(pg, listener)}
	if cfg.GrabberAuth == config.AuthKeys {
		keys, stopKeys, err := startKeyring(ctx, clients, log)
		if err != nil {
			return err
		}
		defer stopKeys()
		opts.Keys = keys
	}
	api := httpapi.New(svc, opts)
	srv := daemon.NewServer(api, log, daemon.DefaultLimits(cfg.GrabberMaxConns))
	log.Info("grabber starting", zap.String("version", daemon.Version("grabber")), zap.Int("shards", clients.Shards), zap.String("prefix", cfg.RedisKeyPrefix),
		zap.String("auth", string(cfg.GrabberAuth)), zap.Bool("access_log", cfg.AccessLog),
		zap.Bool("redis_cluster", len(cfg.RedisClusterAddrs) > 0))
	metricsDone := serveMetrics(ctx, stop, cfg, log)
	// Serve returns once every request in hand has been answered; only then
	// are the allocators and clients closed (deferred above).
	err = daemon.Serve(ctx, log, srv, cfg.GrabberAddr, cfg.ShutdownTimeout)
	stop() // the API is done (or could not listen): the metrics listener ends too
	err = errors.Join(err, metricsDone())
	log.Info("grabber stopped", zap.Error(err))
	return err
}

// startKeyring reads the active API keys and keeps them current until the
// returned stop is called.
func startKeyring(ctx context.Context, clients *daemon.Clients, log *zap.Logger) (*apikey.Keyring, func(), error) {
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	keys, err := apikey.Open(startCtx, clients.PG, apikey.Options{Log: log})
	cancel()
	if err != nil {
		return nil, nil, err
	}
	if keys.Len() == 0 {
		log.Warn("GRABBER_AUTH=keys and no active API key: every /v1/ request is refused until one is made (flusher apikey create)")
	}
	runCtx, stopRun := context.WithCancel(ctx)
	go keys.Run(runCtx)
	return keys, func() { stopRun(); <-keys.Done() }, nil
}

// serveMetrics serves /metrics on METRICS_ADDR, when set, until ctx ends;
// if it cannot, stop ends the grabber too rather than let it run unseen.
// The returned wait gives its end.
func serveMetrics(ctx context.Context, stop func(), cfg config.Config, log *zap.Logger) (wait func() error) {
	if cfg.MetricsAddr == "" {
		return func() error { return nil }
	}
	srv := daemon.NewServer(httpapi.NewMetrics(telemetry.Grabber.Handler(), log), log, daemon.DefaultLimits(metricsMaxConns))
	served := make(chan error, 1)
	go func() {
		served <- daemon.Serve(ctx, log, srv, cfg.MetricsAddr, cfg.ShutdownTimeout)
		stop()
	}()
	return func() error { return <-served }
}

// metricsMaxConns caps the connections of the metrics listener: a few
// scrapers.
const metricsMaxConns = 16
