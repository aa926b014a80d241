// Command flusher drains granted claims from Redis into PostgreSQL and owns
// the schema migrations.
//
//	flusher           apply pending migrations, then run the daemon
//	flusher migrate   apply pending migrations and exit
//	flusher audit     check the money invariants; exit 1 on any violation, 3 while envelopes are suspended
//	flusher recover   reload or refund a suspended envelope
//	flusher retention archive and delete envelopes settled (or failed) longer ago than LEDGER_RETENTION
//	flusher apikey    create, list and revoke the API's keys
//
// `flusher -h` lists the commands, their flags and the settings.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	_ "time/tzdata" // ID_TIME_ZONE works on hosts and images without a zone database

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"redpacket/internal/config"
	"redpacket/internal/daemon"
	"redpacket/internal/flush"
	"redpacket/internal/httpapi"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/retention"
	"redpacket/internal/telemetry"
)

const usage = `usage: flusher [-h] [-version] [command [flags]]

Without a command: apply pending migrations, then drain claims into
PostgreSQL, settle and refund expired envelopes, until SIGINT or SIGTERM.

  -h, -help   print this and exit; "flusher <command> -h" for a command's flags
  -version    print the version and commit, and exit

commands:
`

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

// errUsage is a command line the flusher refuses (its usage is printed):
// exit status 2, nothing done.
var errUsage = exitCode(2)

func run(args []string) error {
	fs := flag.NewFlagSet("flusher", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the usage below says it all
	version := fs.Bool("version", false, "")
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		writeUsage(os.Stdout)
		return nil
	case err != nil:
		fmt.Fprintln(os.Stderr, "flusher:", err)
		writeUsage(os.Stderr)
		return errUsage
	case *version:
		if fs.NArg() > 0 {
			fmt.Fprintf(os.Stderr, "flusher: unexpected argument %q\n", fs.Arg(0))
			writeUsage(os.Stderr)
			return errUsage
		}
		fmt.Println(daemon.Version("flusher"))
		return nil
	case fs.NArg() == 0:
		return runDaemon()
	}
	if fs.Arg(0) == "help" && fs.NArg() == 1 {
		writeUsage(os.Stdout)
		return nil
	}
	c, rest, err := findCommand(fs.Args())
	switch {
	case errors.Is(err, flag.ErrHelp):
		writeUsage(os.Stdout)
		return nil
	case err != nil:
		fmt.Fprintln(os.Stderr, "flusher:", err)
		writeUsage(os.Stderr)
		return errUsage
	}
	return explainTimeLimit(c.run(rest))
}

// findCommand finds the command args start with, by the words of its name
// (one, or two as in "apikey create"), and returns it with the words after
// them. A group's name alone ("apikey") says which commands it has; with
// -h it asks for the usage (flag.ErrHelp).
func findCommand(args []string) (command, []string, error) {
	var group []string
	for _, c := range commands {
		words := strings.Fields(c.name)
		if len(args) >= len(words) && slices.Equal(words, args[:len(words)]) {
			return c, args[len(words):], nil
		}
		if len(words) > 1 && words[0] == args[0] {
			group = append(group, words[1])
		}
	}
	switch {
	case len(group) > 0 && len(args) == 2 && (args[1] == "-h" || args[1] == "-help" || args[1] == "--help"):
		return command{}, nil, flag.ErrHelp
	case len(group) > 0 && len(args) > 1:
		return command{}, nil, fmt.Errorf("%s: unknown command %q; it has %s", args[0], args[1], strings.Join(group, ", "))
	case len(group) > 0:
		return command{}, nil, fmt.Errorf("%s needs a command: %s", args[0], strings.Join(group, ", "))
	}
	return command{}, nil, fmt.Errorf("unknown command %q", args[0])
}

func writeUsage(w io.Writer) {
	fmt.Fprint(w, usage)
	for _, c := range commands {
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("  %-9s %s", c.name, c.synopsis), " "))
		for _, line := range strings.Split(c.about, "\n") {
			fmt.Fprintf(w, "            %s\n", line)
		}
	}
	fmt.Fprint(w, "\nSettings come from the environment (the README tells more of each):\n")
	_ = config.WriteSettings(w, config.Flusher)
}

// loadConfig reads the settings; one it refuses is exit status 2.
func loadConfig() (config.Config, *zap.Logger, error) {
	cfg, log, err := loadSettings()
	if err != nil {
		return cfg, nil, errors.Join(err, errUsage)
	}
	return cfg, log, nil
}

func loadSettings() (config.Config, *zap.Logger, error) {
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return cfg, nil, err
	}
	log, err := telemetry.NewLogger("flusher", cfg.LogLevel)
	return cfg, log, err
}

// runDaemon runs the flusher until a signal. Whatever stops it otherwise
// (settings refused, a server unreachable at start) is its last log line,
// at error level.
func runDaemon() error {
	cfg, log, err := loadSettings()
	evCfg, evErr := config.LoadEvents(os.Getenv)
	err = errors.Join(err, evErr)
	if err == nil {
		if rErr := config.CheckRetentions(cfg.LedgerRetention, evCfg); rErr != nil {
			err = fmt.Errorf("LEDGER_RETENTION: %w", rErr)
		}
	}
	if err == nil && cfg.LedgerArchiveDir != "" {
		// A setting like the others, checked before anything connects.
		if dirErr := retention.CheckDir(cfg.LedgerArchiveDir); dirErr != nil {
			err = fmt.Errorf("LEDGER_ARCHIVE_DIR: %w", dirErr)
		}
	}
	if err != nil {
		telemetry.LogFailure("flusher", log, "flusher refused its settings", err)
		return errUsage
	}
	defer log.Sync() //nolint:errcheck
	if err := flushUntilStopped(cfg, evCfg, log); err != nil {
		telemetry.LogFailure("flusher", log, "flusher stopped", err)
		return exitCode(1)
	}
	return nil
}

// flushUntilStopped runs the flusher until a signal, or until a part of it
// cannot go on: the flush loop, the events and the ops server run in one
// errgroup, so one failing stops the others; then the cleanups close what
// was opened, last first, within SHUTDOWN_TIMEOUT of the stop.
func flushUntilStopped(cfg config.Config, evCfg config.Events, log *zap.Logger) (err error) {
	log.Info("flusher starting", zap.String("version", daemon.Version("flusher")))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer daemon.StopSignals(stop)
	g, gctx := errgroup.WithContext(ctx)
	deadline := daemon.ShutdownDeadline(gctx, cfg.ShutdownTimeout)
	var cleanups daemon.Cleanups
	defer func() { err = errors.Join(err, cleanups.Run(log, deadline())) }()

	if err := applyMigrations(ctx, cfg.DatabaseURL, log); err != nil {
		return daemon.StartErr(ctx, err)
	}
	clients, err := daemon.Open(ctx, config.Flusher, cfg, log, 0) // the claim writes bound their own waits
	if err != nil {
		return daemon.StartErr(ctx, err)
	}
	cleanups.AddClose("postgres and redis clients", clients.Close)
	registerMetrics(clients, evCfg)
	if pool := int(clients.PG.Config().MaxConns); cfg.FlushWriters >= pool {
		// Not an error: the writers and the rest share the pool, waiting
		// for connections instead of working at once.
		log.Warn("FLUSH_WRITERS leaves the flusher's pool no connection of its own for the rest of its work; "+
			"raise pool_max_conns in DATABASE_URL", zap.Int("flush_writers", cfg.FlushWriters), zap.Int("pool_max_conns", pool))
	}

	rs := redisstore.New(clients.Redis, cfg.RedisKeyPrefix, clients.Shards)
	// With GRAB_WAIT_REPLICAS, only claims the replicas hold are written.
	rs.WaitForReplicas(cfg.GrabWaitReplicas, cfg.GrabWaitTimeout)
	f := flush.New(
		rs,
		pgstore.New(clients.PG),
		flush.Config{
			BatchSize:   cfg.FlushBatchSize,
			Pipeline:    cfg.FlushPipeline,
			Writers:     cfg.FlushWriters,
			IdleWait:    cfg.FlushIdleWait,
			MaxBackoff:  cfg.FlushMaxBackoff,
			RepairAfter: cfg.LoadingRepairAfter,
			FailAfter:   cfg.LoadingFailAfter,
			SettleEvery: cfg.SettleEvery,
			KeyTTL:      cfg.SettledKeyTTL,
			// Any number of flushers may run: each drains its share of the
			// shards, and takes over those of one that dies.
			Leases: flush.NewLeases(cfg.DatabaseURL, clients.Shards, log),
			// Half the shutdown's time for the batch in hand leaves the
			// rest to the servers' drain and the cleanups.
			StopGrace: cfg.ShutdownTimeout / 2,
		}, log)
	if err := startEvents(gctx, g, &cleanups, cfg, evCfg, pgstore.New(clients.PG), log); err != nil {
		return daemon.StartErr(ctx, err)
	}
	if err := startRetention(gctx, g, cfg, evCfg, clients.PG, log); err != nil {
		return err
	}
	// The probes and metrics, answered as the API answers (JSON errors,
	// Allow on a 405), within the same limits as the grabber's server. A
	// port it cannot listen on stops the flusher rather than let it run
	// unseen.
	ops := daemon.NewServer(httpapi.NewOps(clients.Ready, telemetry.Flusher.Handler(), log), log, daemon.DefaultLimits(cfg.FlusherMaxConns))
	g.Go(func() error { return daemon.Serve(gctx, log, ops, cfg.FlusherAddr, cfg.ShutdownTimeout) })
	// Run returns after finishing the batch in hand once gctx ends.
	g.Go(func() error { return f.Run(gctx) })
	return g.Wait()
}
