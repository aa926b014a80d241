package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"redpacket/internal/config"
	"redpacket/internal/telemetry"
)

// runHealthcheck is `flusher healthcheck`: exit 0 when the flusher on
// FLUSHER_ADDR answers GET /healthz with 200 within 3 s, 1 otherwise. It is
// the container's HEALTHCHECK (the image has no curl).
func runHealthcheck(args []string) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	if err := parseFlags(fs, "", args); err != nil {
		return helpIsDone(err)
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return err
	}
	if err := telemetry.CheckHealth(cfg.FlusherAddr, 3*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "flusher healthcheck:", err)
		os.Exit(1)
	}
	return nil
}
