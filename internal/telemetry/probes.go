package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// Probes returns the /healthz handler (the process answers) and the /readyz
// handler (ready reports its dependencies reachable within 2 s).
func Probes(ready func(context.Context) error, log *zap.Logger) (healthz, readyz http.HandlerFunc) {
	healthz = func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusOK, "ok") }
	readyz = func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := ready(ctx); err != nil {
			log.Warn("not ready", zap.Error(err))
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
