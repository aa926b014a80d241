package loadgen

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/daemon"
	"redpacket/internal/telemetry"
)

// noopGrabBody is the answer to every grab: the shape and about the size of a
// real one, fixed so the server does no work for it.
const noopGrabBody = `{"envelope_id":1001,"packet_id":50077,"amount_cents":87,` +
	`"order_no":"202611210000000123","grabbed_at":"2026-11-21T10:00:01.123Z","repeat":false}` + "\n"

// NoopServer is `loadgen noop-server`: the same-run reference for the
// grabber. It serves with the grabber's net/http settings and the same serve
// and shutdown code, and answers create and grab in the API's shape without
// doing any work, so a load against it measures the HTTP stack and the load
// tool on this machine, the ceiling the grabber can approach.
func NoopServer(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadgen noop-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8081", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := telemetry.NewLogger("loadgen-noop", "info")
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck
	// The limits of cmd/grabber with its default GRABBER_MAX_CONNS.
	srv := daemon.NewServer(NoopHandler(), log, daemon.DefaultLimits(1024))
	log.Info("noop server starting")
	err = daemon.Serve(ctx, log, srv, *addr, 10*time.Second)
	log.Info("noop server stopped", zap.Error(err))
	return err
}

// NoopHandler answers POST /v1/envelopes with a made-up open envelope (ids
// counting up from 1001) and POST /v1/envelopes/{id}/grab with a fixed packet.
func NoopHandler() http.Handler {
	var nextID atomic.Int64
	nextID.Store(1000)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/envelopes", func(w http.ResponseWriter, r *http.Request) {
		var req createRequest
		_ = json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"envelope_id":%d,"share_code":"26112100000","sender_id":%q,"total_cents":%d,"count":%d,`+
			`"status":"open","expires_at":%q}`+"\n", nextID.Add(1), req.SenderID, req.TotalCents, req.Count,
			time.Now().Add(time.Duration(req.ExpiresInSeconds)*time.Second).UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	})
	mux.HandleFunc("POST /v1/envelopes/{id}/grab", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, noopGrabBody)
	})
	ready := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ready"}`+"\n")
	}
	mux.HandleFunc("GET /healthz", ready)
	mux.HandleFunc("GET /readyz", ready)
	return mux
}
