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
)

// operatorTimeout is an operator command's time limit, from start to end;
// audit and retention take another with -timeout. export has none.
const operatorTimeout = 10 * time.Minute

// timeoutFlag adds -timeout, the command's time limit, to fs.
func timeoutFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("timeout", operatorTimeout, "stop the command once it has run this long")
}

// timeLimitError is the cause of a command's context ending at its time
// limit; flag says whether -timeout sets that limit.
type timeLimitError struct {
	limit time.Duration
	flag  bool
}

func (e *timeLimitError) Error() string {
	if e.flag {
		return fmt.Sprintf("time limit of %s reached, the command was stopped; -timeout gives it longer (e.g. -timeout 2h)", e.limit)
	}
	return fmt.Sprintf("time limit of %s reached, the command was stopped (the limit is fixed for this command)", e.limit)
}

// commandCtx is the context of the command running, one per process, for
// explainTimeLimit.
var commandCtx context.Context

// operatorContext is commandContext with the fixed time limit.
func operatorContext() (context.Context, context.CancelFunc) {
	return commandContext(operatorTimeout, false)
}

// commandContext is a command's context: it ends at SIGINT or SIGTERM, or
// once limit has passed, with a timeLimitError as its cause.
func commandContext(limit time.Duration, flag bool) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeoutCause(ctx, limit, &timeLimitError{limit: limit, flag: flag})
	commandCtx = ctx
	return ctx, func() { cancel(); stop() }
}

// explainTimeLimit says first, before err, that the command was stopped at
// its time limit when it was: what the limit interrupted says no more than
// "context deadline exceeded". The exit status stays err's.
func explainTimeLimit(err error) error {
	if err == nil || commandCtx == nil {
		return err
	}
	var limit *timeLimitError
	if errors.As(context.Cause(commandCtx), &limit) {
		return errors.Join(limit, err)
	}
	return err
}
