// Package telemetry is what the daemons tell operators: the JSON logger,
// every Prometheus metric of the process with the /metrics handler, and the
// /healthz and /readyz probes.
package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewLogger returns a JSON logger at the given level (debug, info, warn,
// error) writing to standard error, tagged with the daemon's name. It also
// takes over what the client libraries and the standard library's log
// package would print as plain text, so that every line a daemon writes is
// JSON.
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
	// A failed request or a lost server is expected and its cause is in the
	// line; a stack trace is only for what must never happen (DPanic and up).
	cfg.DisableStacktrace = true
	log, err := cfg.Build(zap.AddStacktrace(zapcore.DPanicLevel))
	if err != nil {
		return nil, err
	}
	log = log.With(zap.String("daemon", daemon))
	redis.SetLogger(redisLogger{log.Named("redis").WithOptions(zap.WithCaller(false))})
	// What a library prints through the standard logger is a complaint (a
	// net/http server's is its own ErrorLog, see daemon.NewServer): a
	// warning, seen by an operator who filters out info.
	if _, err := zap.RedirectStdLogAt(log.Named("stdlog"), zapcore.WarnLevel); err != nil {
		return nil, fmt.Errorf("redirect the standard logger: %w", err)
	}
	return log, nil
}

// redisLogger writes go-redis's own messages (a dial that failed, a pool
// being closed, a cluster slot reload that failed) as warnings: each is
// about a connection the client retries or gives up, and the caller sees
// the error too.
type redisLogger struct{ log *zap.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Warn(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// LogFailure writes the line a daemon ends with when it cannot start or go
// on: JSON at error level, like every other line, so that a log collector
// sees why it stopped. Without a logger yet (the settings were refused), it
// makes one at info level.
func LogFailure(daemon string, log *zap.Logger, msg string, err error) {
	if log == nil {
		var lerr error
		if log, lerr = NewLogger(daemon, "info"); lerr != nil {
			fmt.Fprintf(os.Stderr, "%s: %s: %v\n", daemon, msg, err)
			return
		}
	}
	log.WithOptions(zap.AddCallerSkip(1)).Error(msg, zap.Error(err))
	_ = log.Sync()
}
