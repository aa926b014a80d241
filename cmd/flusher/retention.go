package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"redpacket/internal/config"
	"redpacket/internal/retention"
)

const retentionSynopsis = "-archive-dir DIR [-older-than DURATION] [-limit N] [-batch N] [-dry-run] [-timeout 10m]"

// runRetention is `flusher retention`: archive the rows of the envelopes
// settled (or failed) longer ago than -older-than (LEDGER_RETENTION by default) into a
// new set of files under -archive-dir, then delete them. For cron, unless
// the daemon runs it (LEDGER_ARCHIVE_DIR).
func runRetention(args []string) error {
	fs := flag.NewFlagSet("retention", flag.ContinueOnError)
	dir := fs.String("archive-dir", "", "directory of the archive (it must exist); each run writes a set of its own in it")
	olderThan := fs.Duration("older-than", 0, "remove envelopes settled (or failed) this long ago or longer (default LEDGER_RETENTION); never below SETTLED_KEY_TTL or EVENTS_RETENTION")
	limit := fs.Int("limit", 0, "most envelopes removed by this run (0: every one due)")
	batch := fs.Int("batch", retention.DefaultBatch, "envelopes per transaction")
	dryRun := fs.Bool("dry-run", false, "print what would be removed and change nothing")
	timeout := timeoutFlag(fs)
	if err := parseFlags(fs, retentionSynopsis, args); err != nil {
		return helpIsDone(err)
	}
	cfg, log, err := loadConfig()
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck
	evCfg, err := config.LoadEvents(os.Getenv)
	if err != nil {
		return errors.Join(err, errUsage)
	}
	age, err := retentionAge(*olderThan, cfg)
	if err == nil {
		err = config.CheckRetentions(age, evCfg)
	}
	if err == nil && *dir == "" && !*dryRun {
		err = errors.New("needs -archive-dir: rows are deleted only once archived")
	}
	if err == nil && (*limit < 0 || *batch < 1 || *timeout <= 0) {
		err = errors.New("-limit must be 0 or more, -batch 1 or more, -timeout more than 0")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "flusher retention:", err)
		fmt.Fprintln(os.Stderr, "usage: flusher retention", retentionSynopsis)
		return errUsage
	}
	ctx, pool, closeDB, err := keysDBWithin(*timeout, true)
	if err != nil {
		return err
	}
	defer closeDB()
	res, err := retention.Run(ctx, pool, retention.Options{OlderThan: age, Dir: *dir, DryRun: *dryRun, Limit: *limit,
		Batch: *batch, DeliveredOnly: evCfg.WebhookEnabled()})
	if err == nil || res.Batches > 0 || res.Set != "" {
		printRetention(res, *dryRun) // what committed stays removed, even after an error
	}
	return err
}

// retentionAge is -older-than, else LEDGER_RETENTION; neither may be below
// SETTLED_KEY_TTL (Redis answers repeats of a settled envelope's grabs until
// then, and PostgreSQL afterwards).
func retentionAge(flagged time.Duration, cfg config.Config) (time.Duration, error) {
	age := flagged
	if age == 0 {
		age = cfg.LedgerRetention
	}
	switch {
	case age == 0:
		return 0, errors.New("needs -older-than, or LEDGER_RETENTION set (it is 0: keep forever)")
	case age < cfg.SettledKeyTTL:
		return 0, fmt.Errorf("-older-than %s is below SETTLED_KEY_TTL (%s)", age, cfg.SettledKeyTTL)
	}
	return age, nil
}

func printRetention(r retention.Result, dry bool) {
	t := r.Removed
	verb := "archived and deleted"
	if dry {
		verb = "dry run: would archive and delete"
	}
	fmt.Printf("%s %d envelopes settled before %s: %d packets, %d cents (%d claimed, %d refunded)\n",
		verb, t.Envelopes, r.Cutoff.UTC().Format(time.RFC3339), t.Packets, t.TotalCents, t.ClaimedCents, t.RefundedCents)
	if !dry {
		fmt.Printf("with %d events, %d claim conflicts, %d recipients, %d split commitments, in %d batches\n",
			t.Events, t.Conflicts, t.Recipients, t.Commitments, r.Batches)
	}
	if r.Set != "" {
		fmt.Println("archive:", r.Set)
	}
	if r.KeptUndelivered {
		fmt.Println("envelopes whose events the webhook receiver has not all accepted were kept")
	}
}

// startRetention runs retention in the daemon, hourly, when
// LEDGER_ARCHIVE_DIR is set (config refuses it without LEDGER_RETENTION,
// and runDaemon a directory that does not exist, before connecting).
func startRetention(ctx context.Context, g *errgroup.Group, cfg config.Config, ev config.Events, pool *pgxpool.Pool,
	log *zap.Logger) error {
	if cfg.LedgerArchiveDir == "" {
		return nil
	}
	loop := &retention.Loop{Pool: pool, Log: log, Options: retention.Options{
		OlderThan: cfg.LedgerRetention, Dir: cfg.LedgerArchiveDir, DeliveredOnly: ev.WebhookEnabled(),
	}}
	g.Go(func() error { return loop.Run(ctx) })
	return nil
}
