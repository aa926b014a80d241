// Command devenv runs the whole service on this machine for development
// (`make dev`): DATABASE_URL and REDIS_URL (or REDIS_CLUSTER_ADDRS) if set,
// otherwise throwaway PostgreSQL and Redis servers of its own; the schema
// migrated; a grabber and a flusher. Ctrl-C stops everything it started.
//
//	devenv [-bin DIR]    DIR holds grabber and flusher (default: devenv's own directory)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"redpacket/internal/devenv"
)

func main() {
	bin := flag.String("bin", "", "directory holding the grabber and flusher binaries (default: this program's)")
	flag.Parse()
	if *bin == "" {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, "devenv:", err)
			os.Exit(1)
		}
		*bin = filepath.Dir(self)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := devenv.Run(ctx, devenv.Config{Bin: *bin, Getenv: os.Getenv, Out: os.Stdout, Logs: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "devenv:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "devenv: stopped")
}
