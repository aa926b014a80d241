package throwaway

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Server is one throwaway server: PostgreSQL or Redis.
type Server struct {
	URL  string // where it listens, with the database or Redis db to use
	Dir  string // its directory, removed when it stops
	name string // its name in the supervisor: Dir/name holds its files
	sup  *supervisor
}

// Stop stops the server and removes its directory (SIGKILL if it has not
// stopped within 10 s); it waits up to 15 s. Not calling it is fine: the
// server stops when this process ends.
func (s *Server) Stop() error { return s.sup.stop(15 * time.Second) }

// Log returns the last n lines of the server's output.
func (s *Server) Log(n int) string { return logTail(filepath.Join(s.Dir, s.name, "out.log"), n) }

// errPortTaken marks a start that failed because another process took the
// port between its pick and the server's bind: worth another try.
var errPortTaken = errors.New("port taken")

// attempts runs try up to three times while it fails with errPortTaken.
func attempts(ctx context.Context, what string, try func() (*Server, error)) (*Server, error) {
	var errs []error
	for attempt := 0; attempt < 3 && ctx.Err() == nil; attempt++ {
		s, err := try()
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return nil, fmt.Errorf("start a throwaway %s: %w", what, errors.Join(errs...))
}

// waitUp polls ready every 50 ms until it says yes, the server exits
// (an error with the end of its output) or d passes.
func waitUp(ctx context.Context, sup *supervisor, name string, d time.Duration, ready func() (bool, error)) error {
	logPath := filepath.Join(sup.dir, name, "out.log")
	deadline := time.Now().Add(d)
	for {
		ok, err := ready()
		if ok || err != nil {
			return err
		}
		if sup.exited(name) {
			out := logTail(logPath, 20)
			if strings.Contains(out, "Address already in use") || strings.Contains(out, "could not bind") {
				return fmt.Errorf("%s: %w:\n%s", name, errPortTaken, out)
			}
			return fmt.Errorf("%s exited at start:\n%s", name, out)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not up after %s:\n%s", name, d, logTail(logPath, 20))
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
