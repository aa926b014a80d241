// Package telemetry is what the daemons tell operators: the JSON logger,
// every Prometheus metric of the process with the /metrics handler, and the
// /healthz and /readyz probes.
package telemetry

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewLogger returns a JSON logger at the given level (debug, info, warn,
// error) writing to standard error, tagged with the daemon's name.
func NewLogger(daemon, level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("LOG_LEVEL: %w", err)
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.EncoderConfig.EncodeDuration = zapcore.StringDurationEncoder
	cfg.Sampling = nil // every error line matters at 3 a.m.
	log, err := cfg.Build()
	if err != nil {
		return nil, err
	}
	return log.With(zap.String("daemon", daemon)), nil
}
