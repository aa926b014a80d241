// Command flusher drains granted claims from Redis into PostgreSQL and owns
// the schema migrations.
//
//	flusher           apply pending migrations, then run the daemon
//	flusher migrate   apply pending migrations and exit
//	flusher audit     check the money invariants; exit 1 on any violation
//	flusher recover   reload or refund a suspended envelope
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/config"
	"redpacket/internal/daemon"
	"redpacket/internal/flush"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/telemetry"
	"redpacket/migrations"
)

const usage = `usage: flusher [command]

commands:
  (none)    apply pending migrations, then drain claims until SIGINT/SIGTERM
  migrate   apply pending migrations and exit
  audit     [-since 48h | -all] [-json]
            check the money invariants over PostgreSQL and Redis; exit 1 on
            any violation, 2 when the audit could not run
  recover   -envelope N -action reload|refund [-dry-run]
            print what would happen to a suspended envelope and, without
            -dry-run, do it; exit 1 when it cannot be done now

Settings come from the environment; see the README.`

func main() {
	if err := run(os.Args[1:]); err != nil {
		if msg := strings.TrimSpace(err.Error()); msg != "" {
			fmt.Fprintln(os.Stderr, "flusher:", msg)
		}
		var ec exitCode
		if errors.As(err, &ec) {
			os.Exit(int(ec))
		}
		os.Exit(1)
	}
}

// exitCode makes main exit with a code of its own; joined to an error, it
// adds nothing to the message.
type exitCode int

func (c exitCode) Error() string { return "" }

func run(args []string) error {
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return err
	}
	log, err := telemetry.NewLogger("flusher", cfg.LogLevel)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck

	switch {
	case len(args) == 0:
		return runDaemon(cfg, log)
	case len(args) == 1 && args[0] == "migrate":
		if err := migrations.Up(cfg.DatabaseURL); err != nil {
			return err
		}
		log.Info("schema is up to date", zap.Int("version", migrations.Version))
		return nil
	case args[0] == "audit":
		return runAudit(cfg, args[1:])
	case args[0] == "recover":
		return runRecover(cfg, log, args[1:])
	case len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help"):
		fmt.Println(usage)
		return nil
	}
	return errors.New("unknown command\n" + usage)
}

func runDaemon(cfg config.Config, log *zap.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	evCfg, err := config.LoadEvents(os.Getenv)
	if err != nil {
		return err
	}
	if err := migrations.Up(cfg.DatabaseURL); err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	clients, err := daemon.Connect(startCtx, cfg)
	cancel()
	if err != nil {
		return err
	}
	defer clients.Close()

	rs := redisstore.New(clients.Redis, cfg.RedisKeyPrefix, clients.Shards)
	// With GRAB_WAIT_REPLICAS, only claims the replicas hold are written.
	rs.WaitForReplicas(cfg.GrabWaitReplicas, cfg.GrabWaitTimeout)
	f := flush.New(
		rs,
		pgstore.New(clients.PG),
		flush.Config{
			BatchSize:   cfg.FlushBatchSize,
			IdleWait:    cfg.FlushIdleWait,
			MaxBackoff:  cfg.FlushMaxBackoff,
			RepairAfter: cfg.LoadingRepairAfter,
			FailAfter:   cfg.LoadingFailAfter,
			SettleEvery: cfg.SettleEvery,
			KeyTTL:      cfg.SettledKeyTTL,
			// Any number of flushers may run: each drains its share of the
			// shards, and takes over those of one that dies.
			Leases: flush.NewLeases(cfg.DatabaseURL, clients.Shards, log),
		}, log)

	waitEvents, err := startEvents(ctx, cfg, evCfg, pgstore.New(clients.PG), log)
	if err != nil {
		return err
	}

	ops := &http.Server{Handler: opsHandler(clients, log), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() {
		served <- daemon.Serve(ctx, log, ops, cfg.FlusherAddr, cfg.ShutdownTimeout)
		stop() // the probes are gone (say, the port is taken): stop rather than run unseen
	}()

	// Run returns after finishing the batch in hand once ctx is cancelled.
	runErr := f.Run(ctx)
	stop()
	waitEvents()
	return errors.Join(runErr, <-served)
}

// opsHandler serves /healthz, /readyz and /metrics.
func opsHandler(c *daemon.Clients, log *zap.Logger) http.Handler {
	healthz, readyz := telemetry.Probes(c.Ready, log)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", readyz)
	mux.Handle("GET /metrics", telemetry.MetricsHandler())
	return mux
}
