package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"redpacket/internal/audit"
	"redpacket/internal/daemon"
	"redpacket/internal/flush"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
)

// The operator commands' flags, as their usage shows them.
const (
	auditSynopsis   = "[-since 48h | -all] [-json] [-timeout 10m]"
	recoverSynopsis = "-envelope N -action reload|refund [-dry-run]"
)

func runAudit(args []string) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	since := fs.Duration("since", 48*time.Hour, "check envelopes created or settled this long ago or later, and every unfinished one")
	all := fs.Bool("all", false, "check every envelope (reads every packet)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	timeout := timeoutFlag(fs)
	if err := parseFlags(fs, auditSynopsis, args); err != nil {
		return helpIsDone(err)
	}
	if *timeout <= 0 {
		fmt.Fprintf(os.Stderr, "flusher audit: -timeout %s: must be more than 0\n", *timeout)
		fmt.Fprintln(os.Stderr, "usage: flusher audit", auditSynopsis)
		return errUsage
	}
	if *since <= 0 {
		// 0 or less would check the unfinished envelopes alone, and still
		// record a run in audit_last_run as if the audit had been done.
		fmt.Fprintf(os.Stderr, "flusher audit: -since %s: must be more than 0 (-all checks everything)\n", *since)
		fmt.Fprintln(os.Stderr, "usage: flusher audit", auditSynopsis)
		return errUsage
	}
	cfg, log, err := loadConfig()
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck
	ctx, cancel := commandContext(*timeout, true)
	defer cancel()
	clients, err := daemon.Connect(ctx, cfg, 0)
	if err != nil {
		return errors.Join(err, exitCode(2))
	}
	defer clients.Close()
	opts := audit.Options{Redis: clients.Redis, Keys: redisstore.NewKeys(cfg.RedisKeyPrefix, clients.Shards)}
	if !*all {
		opts.Since = time.Now().Add(-*since)
	}
	rep, err := audit.Run(ctx, clients.PG, opts)
	if err != nil {
		return errors.Join(err, exitCode(2))
	}
	if *asJSON {
		err = rep.WriteJSON(os.Stdout)
	} else {
		err = rep.WriteText(os.Stdout)
	}
	if err != nil {
		return errors.Join(err, exitCode(2))
	}
	// Kept for the flushers' metrics; an audit that cannot record still
	// reports by its output and exit status.
	if err := audit.Record(ctx, clients.PG, rep, time.Now(), *all); err != nil {
		fmt.Fprintln(os.Stderr, "flusher:", err)
	}
	switch rep.ExitCode() {
	case audit.ExitViolation:
		return errors.Join(fmt.Errorf("audit found %d violations", len(rep.Violations)), exitCode(audit.ExitViolation))
	case audit.ExitSuspended:
		return errors.Join(fmt.Errorf("%d envelopes are suspended and wait for flusher recover", len(rep.Suspended)),
			exitCode(audit.ExitSuspended))
	}
	return nil
}

func runRecover(args []string) error {
	fs := flag.NewFlagSet("recover", flag.ContinueOnError)
	id := fs.Int64("envelope", 0, "id of the suspended envelope")
	action := fs.String("action", "", "reload (offer the unclaimed packets again) or refund (settle now)")
	dryRun := fs.Bool("dry-run", false, "print what would happen and change nothing")
	if err := parseFlags(fs, recoverSynopsis, args); err != nil {
		return helpIsDone(err)
	}
	if *id <= 0 || (flush.Action(*action) != flush.ActionReload && flush.Action(*action) != flush.ActionRefund) {
		fmt.Fprintln(os.Stderr, "flusher recover: needs -envelope N and -action reload or refund")
		fmt.Fprintln(os.Stderr, "usage: flusher recover", recoverSynopsis)
		return errUsage
	}
	cfg, log, err := loadConfig()
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck
	ctx, cancel := operatorContext()
	defer cancel()
	clients, err := daemon.Connect(ctx, cfg, 0)
	if err != nil {
		return err
	}
	defer clients.Close()
	f := flush.New(redisstore.New(clients.Redis, cfg.RedisKeyPrefix, clients.Shards), pgstore.New(clients.PG),
		flush.Config{KeyTTL: cfg.SettledKeyTTL}, log)
	plan, err := f.PlanRecovery(ctx, *id, flush.Action(*action))
	if err != nil {
		return err
	}
	if err := plan.WriteText(os.Stdout); err != nil {
		return err
	}
	if *dryRun {
		fmt.Println("dry run: nothing changed")
		if plan.Blocked != "" {
			return exitCode(1)
		}
		return nil
	}
	status, err := f.Recover(ctx, plan)
	if err != nil {
		return err
	}
	fmt.Printf("done: envelope %d is %s\n", *id, status)
	return nil
}
