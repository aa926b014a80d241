// Command loadgen drives a grab load against a deployment of the service and
// checks the answers; `loadgen noop-server` serves the no-op reference and
// `loadgen bench-page` turns a make bench result into an HTML page.
// Flags and output: `loadgen -h` and internal/loadgen.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"redpacket/internal/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal the load stops and reports; a second one kills.
	context.AfterFunc(ctx, stop)
	os.Exit(run(ctx, os.Args[1:]))
}

func run(ctx context.Context, args []string) int {
	if len(args) > 0 && args[0] == "noop-server" {
		if err := loadgen.NoopServer(ctx, args[1:], os.Stderr); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			fmt.Fprintln(os.Stderr, "loadgen noop-server:", err)
			return 1
		}
		return 0
	}
	if len(args) > 0 && args[0] == "bench-page" {
		if err := loadgen.BenchPage(args[1:], os.Stderr); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			fmt.Fprintln(os.Stderr, "loadgen bench-page:", err)
			return 2
		}
		return 0
	}
	cfg, err := loadgen.ParseFlags(args, os.Getenv, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		return 2
	}
	return loadgen.Run(ctx, cfg, os.Stdout, os.Stderr)
}
