package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// Probes returns the /healthz handler (the process answers) and the /readyz
// handler (ready reports its dependencies reachable within 2 s). logOf is
// the logger of a request.
func Probes(ready func(context.Context) error, logOf func(*http.Request) *zap.Logger) (healthz, readyz http.HandlerFunc) {
	healthz = func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusOK, "ok") }
	readyz = func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := ready(ctx); err != nil {
			logOf(r).Warn("not ready", zap.Error(err))
			reply(w, http.StatusServiceUnavailable, "unavailable")
			return
		}
		reply(w, http.StatusOK, "ready")
	}
	return healthz, readyz
}

func reply(w http.ResponseWriter, code int, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"status": status})
}

// CheckHealth GETs /healthz of a daemon listening on listenAddr (as in
// GRABBER_ADDR or FLUSHER_ADDR: a host left out or unspecified is reached on
// loopback) and returns nil if it answers 200 within timeout. It is the
// daemons' `healthcheck` subcommand, which a container runs: the image has
// no curl.
func CheckHealth(listenAddr string, timeout time.Duration) error {
	addr, err := dialAddr(listenAddr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", req.URL, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", req.URL, resp.Status)
	}
	return nil
}

// dialAddr turns a listen address into one to dial: ":8080", "0.0.0.0:8080"
// and "[::]:8080" are reached on loopback.
func dialAddr(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("address %q: %w", listen, err)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port), nil
}
