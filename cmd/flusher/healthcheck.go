package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"redpacket/internal/config"
	"redpacket/internal/daemon"
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
		daemons = daemon.Running(proc, os.Getpid())
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
