package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/audit"
	"redpacket/internal/config"
	"redpacket/internal/daemon"
	"redpacket/internal/flush"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
)

// operatorTimeout bounds an operator command from start to end.
const operatorTimeout = 10 * time.Minute

func operatorContext() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, operatorTimeout)
	return ctx, func() { cancel(); stop() }
}

func runAudit(cfg config.Config, args []string) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	since := fs.Duration("since", 48*time.Hour, "check envelopes created this long ago or later, and every unfinished one")
	all := fs.Bool("all", false, "check every envelope (reads every packet)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return exitCode(2)
	}
	ctx, cancel := operatorContext()
	defer cancel()
	clients, err := daemon.Connect(ctx, cfg)
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
	if !rep.OK() {
		return errors.Join(fmt.Errorf("audit found %d violations", len(rep.Violations)), exitCode(1))
	}
	return nil
}

func runRecover(cfg config.Config, log *zap.Logger, args []string) error {
	fs := flag.NewFlagSet("recover", flag.ContinueOnError)
	id := fs.Int64("envelope", 0, "id of the suspended envelope")
	action := fs.String("action", "", "reload (offer the unclaimed packets again) or refund (settle now)")
	dryRun := fs.Bool("dry-run", false, "print what would happen and change nothing")
	if err := fs.Parse(args); err != nil {
		return exitCode(2)
	}
	if *id <= 0 || (*action != flush.ActionReload && *action != flush.ActionRefund) {
		fs.Usage()
		return errors.Join(errors.New("recover needs -envelope N and -action reload or refund"), exitCode(2))
	}
	ctx, cancel := operatorContext()
	defer cancel()
	clients, err := daemon.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer clients.Close()
	f := flush.New(redisstore.New(clients.Redis, cfg.RedisKeyPrefix, clients.Shards), pgstore.New(clients.PG),
		flush.Config{KeyTTL: cfg.SettledKeyTTL}, log)
	plan, err := f.PlanRecovery(ctx, *id, *action)
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
