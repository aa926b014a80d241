package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"go.uber.org/zap"

	"redpacket/internal/daemon"
	"redpacket/internal/telemetry"
	"redpacket/migrations"
)

// command is a subcommand: `flusher <name> [flags]`, the name one word or
// two (a group's, as "apikey create"). To add one, write its run in a file
// of its own and add a line to commands.
type command struct {
	name     string
	synopsis string // its flags, for the usage
	about    string // what it does, for the usage; lines of at most 66 characters
	run      func(args []string) error
}

// commands are the subcommands, in the order the usage lists them.
var commands = []command{
	{"migrate", "", "apply pending migrations and exit", runMigrate},
	{"audit", auditSynopsis,
		"check the money invariants over PostgreSQL and Redis; exit 1 on\nany violation, 2 when the audit could not run, 3 when envelopes\nare suspended (and nothing is violated)",
		runAudit},
	{"recover", recoverSynopsis,
		"print what would happen to a suspended envelope and, without\n-dry-run, do it; exit 1 when it cannot be done now",
		runRecover},
	{"export", exportSynopsis,
		"write every money movement (funded, claimed, refunded) of the days\nfrom -from to -to in ID_TIME_ZONE to standard output",
		runExport},
	{"retention", retentionSynopsis,
		"archive the envelopes settled (or failed) longer ago than\nLEDGER_RETENTION (or -older-than) into a new file set under -archive-dir, then\ndelete them from PostgreSQL (docs/dba.md, \"Retention and archives\")",
		runRetention},
	{"healthcheck", "[-running]",
		"exit 0 if the flusher on FLUSHER_ADDR answers /healthz (a\ncontainer's health check), 1 if not; with -running, the daemon\nrunning here instead, grabber or flusher (the image's check)",
		runHealthcheck},
	{"apikey create", apikeyCreateSynopsis, "make an API key (GRABBER_AUTH=keys) and print it, once, alone on\nstandard output", runAPIKeyCreate},
	{"apikey list", apikeyListSynopsis, "list the API keys: names, clients, scopes, creation and last use", runAPIKeyList},
	{"apikey revoke", apikeyRevokeSynopsis, "revoke an API key: every grabber refuses it within seconds", runAPIKeyRevoke},
	{"dba grant", dbaSynopsis, "let an existing role read every table and view, and the tables\nlater migrations add (docs/dba.md)", runDBAGrant},
	{"dba revoke", dbaSynopsis, "take back what dba grant gave a role", runDBARevoke},
}

// errHelp ends a command that printed its usage because it was asked to.
var errHelp = errors.New("help requested")

// parseFlags reads a command's flags and refuses anything else: the flag
// package stops at the first word that is not a flag, so in
// `recover -envelope 7 -action refund now -dry-run` it would take "now" as
// an argument and leave -dry-run unread. An irreversible command must never
// run because of a typo, so any word left over is an error. It returns
// errHelp after printing the usage for -h, and an exit status 2 (with the
// usage on standard error) for anything it refuses.
func parseFlags(fs *flag.FlagSet, synopsis string, args []string) error {
	fs.SetOutput(io.Discard)
	usage := func(w io.Writer) {
		fmt.Fprintln(w, strings.TrimSpace("usage: flusher "+fs.Name()+" "+synopsis))
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage(os.Stdout)
		return errHelp
	case err != nil:
		fmt.Fprintf(os.Stderr, "flusher %s: %v\n", fs.Name(), err)
	case fs.NArg() > 0:
		fmt.Fprintf(os.Stderr, "flusher %s: unexpected argument %q (flags go before anything else, and %s takes nothing else)\n",
			fs.Name(), fs.Arg(0), fs.Name())
	default:
		return nil
	}
	usage(os.Stderr)
	return errUsage
}

func runMigrate(args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	if err := parseFlags(fs, "", args); err != nil {
		return helpIsDone(err)
	}
	cfg, log, err := loadSettings()
	if err != nil {
		telemetry.LogFailure("flusher", log, "flusher refused its settings", err)
		return errUsage
	}
	defer log.Sync() //nolint:errcheck
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer daemon.StopSignals(stop)
	if err := applyMigrations(ctx, cfg.DatabaseURL, log); err != nil {
		telemetry.LogFailure("flusher", log, "migrations failed", err)
		return exitCode(1)
	}
	return nil
}

// applyMigrations applies the pending migrations and says which, by
// version and name, or that there were none; it waits for another process
// applying them until ctx ends, and says so.
func applyMigrations(ctx context.Context, databaseURL string, log *zap.Logger) error {
	applied, version, err := migrations.Apply(ctx, databaseURL, func() {
		log.Info("another process is applying migrations; waiting for it")
	})
	if err != nil {
		if len(applied) > 0 { // those before a failure or a stop stay applied
			logApplied(log, applied)
		}
		return err
	}
	switch {
	case len(applied) == 0 && version > migrations.Version:
		// A newer build migrated it; the daemons of this one accept it.
		log.Info("schema is newer than this build's; no migration applied",
			zap.Int("version", version), zap.Int("build_version", migrations.Version))
		return nil
	case len(applied) == 0:
		log.Info("schema is up to date; no migration applied", zap.Int("version", version))
		return nil
	}
	logApplied(log, applied)
	return nil
}

// logApplied logs the migrations applied, by version and name.
func logApplied(log *zap.Logger, applied []migrations.Migration) {
	names := make([]string, len(applied))
	for i, m := range applied {
		names[i] = m.String()
	}
	log.Info("applied migrations", zap.Int("count", len(applied)), zap.Strings("migrations", names),
		zap.Int("version", applied[len(applied)-1].Version))
}

// helpIsDone turns errHelp into success: the usage asked for is printed.
func helpIsDone(err error) error {
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}
