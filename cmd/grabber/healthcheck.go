package main

import (
	"fmt"
	"os"
	"time"

	"redpacket/internal/config"
	"redpacket/internal/telemetry"
)

// exitIfHealthcheck runs `grabber healthcheck` and exits: 0 when the grabber
// on GRABBER_ADDR answers GET /healthz with 200 within 3 s, 1 otherwise. It
// is the container's HEALTHCHECK (the image has no curl). Any other
// arguments return at once.
func exitIfHealthcheck(args []string) {
	if len(args) != 1 || args[0] != "healthcheck" {
		return
	}
	cfg, err := config.Load(os.Getenv)
	if err == nil {
		err = telemetry.CheckHealth(cfg.GrabberAddr, 3*time.Second)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "grabber healthcheck:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
