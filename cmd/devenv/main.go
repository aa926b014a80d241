// Command devenv runs the whole service on this machine for development
// (`make dev`): DATABASE_URL and REDIS_URL (or REDIS_CLUSTER_ADDRS) if both
// are set, throwaway PostgreSQL and Redis servers of its own if neither is;
// the schema migrated; a grabber and a flusher. Ctrl-C stops everything it
// started. Only one of the two set is refused (exit 2, nothing started): a
// throwaway server next to a real one would mix their data.
//
//	devenv [-bin DIR]    DIR holds grabber and flusher (default: devenv's own directory)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"redpacket/internal/devenv"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run returns the exit status: 0 once stopped by a signal, 2 for a command
// line or an environment it refuses (nothing started), 1 for anything else.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("devenv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("bin", "", "directory holding the grabber and flusher binaries (default: this program's)")
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return 2
	}
	if *bin == "" {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(stderr, "devenv:", err)
			return 1
		}
		*bin = filepath.Dir(self)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := devenv.Run(ctx, devenv.Config{Bin: *bin, Getenv: getenv, Out: stdout, Logs: stderr})
	var refused *devenv.SettingsError
	switch {
	case errors.As(err, &refused):
		fmt.Fprintln(stderr, "devenv:", err)
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "devenv:", err)
		return 1
	}
	fmt.Fprintln(stderr, "devenv: stopped")
	return 0
}
