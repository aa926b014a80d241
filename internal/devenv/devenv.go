// Package devenv runs the whole service on one machine for development
// (`make dev`): PostgreSQL and Redis named by the environment, or throwaway
// servers of its own when neither is (never one of each); the schema
// migrated; a grabber and
// a flusher. It prints where everything is and a first request, and stops
// everything it started, in order, when its context ends (Ctrl-C).
package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"redpacket/internal/testenv/throwaway"
)

// Config is what Run needs.
type Config struct {
	Bin    string              // directory holding the grabber and flusher binaries
	Getenv func(string) string // the environment (os.Getenv)
	Out    io.Writer           // where the summary goes (stdout)
	Logs   io.Writer           // where the daemons' logs go (stderr)
}

// SettingsError is an environment Run refuses before it starts anything;
// cmd/devenv exits 2 for it, as the daemons do for a setting they refuse.
type SettingsError struct{ msg string }

func (e *SettingsError) Error() string { return e.msg }

// checkServers refuses DATABASE_URL without REDIS_URL (or
// REDIS_CLUSTER_ADDRS), and the other way round: a throwaway server next to
// a real one mixes their data. The flusher would write the real Redis's
// queued claims into a throwaway PostgreSQL as conflicts, remove them from
// the queue and suspend their envelopes (grabs answered 200, lost); or it
// would take every shard of an empty throwaway Redis for one that lost its
// data and suspend every open envelope of the real ledger.
func checkServers(getenv func(string) string) error {
	db := getenv("DATABASE_URL") != ""
	redis := getenv("REDIS_URL") != "" || getenv("REDIS_CLUSTER_ADDRS") != ""
	if db == redis {
		return nil
	}
	set, unset := "DATABASE_URL", "REDIS_URL (or REDIS_CLUSTER_ADDRS)"
	if redis {
		set, unset = unset, "DATABASE_URL"
	}
	return &SettingsError{fmt.Sprintf("%s is set but %s is not: set both, to run on servers of your own, "+
		"or neither, to run on throwaway ones; a throwaway server next to a real one would mix their data "+
		"(the flusher would move the real Redis's claims into a throwaway PostgreSQL, or suspend the real "+
		"ledger's open envelopes)", set, unset)}
}

// Run starts the service and keeps it running until ctx ends, then stops
// the daemons (SIGTERM, as a supervisor would) and the servers it started.
// It returns early, with an error, when something fails to start or a
// daemon exits by itself; with a *SettingsError, having started nothing,
// when only one of DATABASE_URL and REDIS_URL (or REDIS_CLUSTER_ADDRS) is
// set.
func Run(ctx context.Context, cfg Config) (err error) {
	if err := checkServers(cfg.Getenv); err != nil {
		return err
	}
	env, stopServers, err := servers(ctx, cfg)
	defer func() { err = errors.Join(err, stopServers()) }()
	if err != nil {
		return err
	}
	grabberAddr := orDefault(cfg.Getenv("GRABBER_ADDR"), "127.0.0.1:8080")
	flusherAddr := orDefault(cfg.Getenv("FLUSHER_ADDR"), "127.0.0.1:9091")
	env.set("GRABBER_ADDR", grabberAddr)
	env.set("FLUSHER_ADDR", flusherAddr)

	migrate := exec.CommandContext(ctx, filepath.Join(cfg.Bin, "flusher"), "migrate")
	migrate.Env, migrate.Stdout, migrate.Stderr = env.list(), cfg.Logs, cfg.Logs
	if err := migrate.Run(); err != nil {
		return fmt.Errorf("flusher migrate: %w", err)
	}
	exited := make(chan error, 2)
	var daemons []*daemon
	defer func() {
		// The grabber first, so that no grab arrives once the flusher stops.
		for i := len(daemons) - 1; i >= 0; i-- {
			err = errors.Join(err, daemons[i].stop())
		}
	}()
	for _, d := range []struct{ bin, ready string }{
		{"flusher", "http://" + flusherAddr + "/readyz"},
		{"grabber", "http://" + grabberAddr + "/readyz"},
	} {
		p, err := startDaemon(filepath.Join(cfg.Bin, d.bin), env.list(), cfg.Logs, exited)
		if err != nil {
			return err
		}
		daemons = append(daemons, p)
		if err := waitReady(ctx, d.ready, exited); err != nil {
			return fmt.Errorf("%s: %w", d.bin, err)
		}
	}
	if err := printSummary(cfg.Out, env, grabberAddr, flusherAddr); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-exited:
		// A daemon that exits 0 was stopped by a signal: a Ctrl-C reaches
		// every process of the terminal's group, the daemons too.
		return err
	}
}

// servers returns the daemons' environment: this process's, with
// DATABASE_URL and REDIS_URL of throwaway servers when they are not set
// (REDIS_CLUSTER_ADDRS stands for REDIS_URL; checkServers has made sure
// that both are set or neither). stop stops those servers.
func servers(ctx context.Context, cfg Config) (env *environ, stop func() error, err error) {
	env = newEnviron(os.Environ())
	var started []*throwaway.Server
	stop = func() error {
		var errs []error
		for _, s := range started {
			errs = append(errs, s.Stop())
		}
		return errors.Join(errs...)
	}
	if cfg.Getenv("DATABASE_URL") == "" {
		s, err := throwaway.StartPostgres(ctx)
		if err != nil {
			return env, stop, fmt.Errorf("DATABASE_URL is not set, and: %w", err)
		}
		started = append(started, s)
		env.set("DATABASE_URL", s.URL)
		env.throwaway["DATABASE_URL"] = s.Dir
	}
	if cfg.Getenv("REDIS_URL") == "" && cfg.Getenv("REDIS_CLUSTER_ADDRS") == "" {
		s, err := throwaway.StartRedis(ctx)
		if err != nil {
			return env, stop, fmt.Errorf("REDIS_URL is not set, and: %w", err)
		}
		started = append(started, s)
		env.set("REDIS_URL", s.URL)
		env.throwaway["REDIS_URL"] = s.Dir
	}
	return env, stop, nil
}

// waitReady polls url until it answers 200, the context ends, a daemon
// exits or 30 s pass.
func waitReady(ctx context.Context, url string, exited chan error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w", url, ctx.Err())
		case err := <-exited:
			if err == nil {
				err = errors.New("a daemon stopped before it was ready")
			}
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// daemon is a running grabber or flusher.
type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once it has exited
}

// startDaemon starts bin; its exit is sent on exited (nil for exit 0),
// unless exited is full.
func startDaemon(bin string, env []string, logs io.Writer, exited chan<- error) (*daemon, error) {
	d := &daemon{name: filepath.Base(bin), cmd: exec.Command(bin), done: make(chan struct{})}
	d.cmd.Env, d.cmd.Stdout, d.cmd.Stderr = env, logs, logs
	d.cmd.SysProcAttr = daemonProcAttr()
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", d.name, err)
	}
	go func() {
		err := d.cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%s exited: %w", d.name, err)
		}
		close(d.done)
		select {
		case exited <- err:
		default:
		}
	}()
	return d, nil
}

// stop sends SIGTERM (the daemon may have had SIGINT from the terminal
// already) and waits up to 30 s, then kills it.
func (d *daemon) stop() error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
		return fmt.Errorf("%s still running 30s after SIGTERM: killed", d.name)
	}
	if st := d.cmd.ProcessState; !st.Success() {
		return fmt.Errorf("%s: %v", d.name, st)
	}
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
