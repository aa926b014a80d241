package telemetry

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// Summary logs a condition that can come once per request (a dependency
// down answers every request 503) as at most one line per interval: the
// first occurrence at once, then, at the end of each interval that saw more,
// one line with how many there were and the fields of the last. The metrics
// count every occurrence; the log only says that it is happening and why.
type Summary struct {
	log   *zap.Logger
	msg   string
	every time.Duration

	mu    sync.Mutex
	quiet bool        // within an interval that began with a logged line
	count int         // occurrences since the last line
	last  []zap.Field // the fields of the latest occurrence
}

// NewSummary returns a summary writing msg as a warning to log, at most once
// per every.
func NewSummary(log *zap.Logger, msg string, every time.Duration) *Summary {
	return &Summary{log: log, msg: msg, every: every}
}

// Add records one occurrence with its fields.
func (s *Summary) Add(fields ...zap.Field) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.quiet {
		s.quiet = true
		s.log.Warn(s.msg, append(fields, zap.Int("count", 1))...)
		time.AfterFunc(s.every, s.flush)
		return
	}
	s.count++
	s.last = fields
}

// flush ends an interval: it logs what the interval saw after its first
// line, if anything, and starts another; an interval that saw nothing more
// ends the quiet, so the next occurrence is logged at once.
func (s *Summary) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.count == 0 {
		s.quiet = false
		return
	}
	s.log.Warn(s.msg, append(s.last, zap.Int("count", s.count), zap.Duration("over", s.every))...)
	s.count, s.last = 0, nil
	time.AfterFunc(s.every, s.flush)
}
