package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"redpacket/internal/config"
	"redpacket/internal/telemetry"
)

// runHealthcheck is `flusher healthcheck`: exit 0 when the flusher on
// FLUSHER_ADDR answers GET /healthz with 200 within 3 s, 1 otherwise. It is
// the container's health check (the image has no curl). With -running it
// checks whichever daemon runs in the container instead, found in /proc:
// the image's HEALTHCHECK, the same for a container running the grabber
// and one running the flusher.
func runHealthcheck(args []string) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	running := fs.Bool("running", false, "check the daemon running here (grabber or flusher, found in /proc), not the flusher")
	if err := parseFlags(fs, "[-running]", args); err != nil {
		return helpIsDone(err)
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return err
	}
	proc := ""
	if *running {
		proc = "/proc"
	}
	if err := checkHealth(cfg, proc); err != nil {
		fmt.Fprintln(os.Stderr, "flusher healthcheck:", err)
		os.Exit(1)
	}
	return nil
}

// checkHealth checks the flusher's /healthz or, given a proc (a /proc),
// that of each daemon running there (an error if none does).
func checkHealth(cfg config.Config, proc string) error {
	daemons := []string{"flusher"}
	if proc != "" {
		daemons = runningDaemons(proc, os.Getpid())
		if len(daemons) == 0 {
			return fmt.Errorf("no grabber or flusher daemon runs here (none in %s)", proc)
		}
	}
	addrs := map[string]string{"grabber": cfg.GrabberAddr, "flusher": cfg.FlusherAddr}
	var errs []error
	for _, d := range daemons {
		err := telemetry.CheckHealth(addrs[d], 3*time.Second)
		if err != nil && proc != "" {
			err = fmt.Errorf("%s: %w", d, err)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// runningDaemons is the daemons ("grabber", "flusher") running as processes
// of proc (a /proc), but for the process self: a grabber run with no
// argument, or a flusher (a command such as `flusher migrate` or this
// health check is not the daemon). Sorted, each once.
func runningDaemons(proc string, self int) []string {
	entries, err := os.ReadDir(proc)
	if err != nil {
		return nil
	}
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(proc, e.Name(), "cmdline"))
		if err != nil {
			continue // gone since, or not ours to read
		}
		argv := bytes.Split(bytes.TrimSuffix(raw, []byte{0}), []byte{0})
		if len(argv) != 1 {
			continue
		}
		if name := filepath.Base(string(argv[0])); (name == "grabber" || name == "flusher") && !slices.Contains(found, name) {
			found = append(found, name)
		}
	}
	slices.Sort(found)
	return found
}
