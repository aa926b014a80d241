// Package events serves the outbox the flusher writes (see the events table):
// a feed read by cursor with long polling, signed webhooks delivered at least
// once and in order per envelope, and the retention that prunes old events.
package events

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"redpacket/internal/db/dburl"
	"redpacket/internal/pgstore"
)

// Listener holds one PostgreSQL connection that LISTENs for committed events
// and wakes everything waiting for them, so that any number of long polls
// (and the webhook sender) share one connection and none of them polls.
type Listener struct {
	databaseURL string
	log         *zap.Logger

	mu   sync.Mutex
	wake chan struct{} // closed, and replaced, when events commit
	done chan struct{} // closed when Run returns
}

// NewListener returns a Listener on the database; Run starts it.
func NewListener(databaseURL string, log *zap.Logger) *Listener {
	if log == nil {
		log = zap.NewNop()
	}
	return &Listener{databaseURL: databaseURL, log: log, wake: make(chan struct{}), done: make(chan struct{})}
}

// Changed returns a channel that is closed the next time events commit (or
// the listener reconnects, when it cannot know what it missed). Take it
// before reading, then wait on it: a commit after the read closes it.
func (l *Listener) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wake
}

// Done is closed when Run has returned: waiters stop waiting.
func (l *Listener) Done() <-chan struct{} { return l.done }

func (l *Listener) broadcast() {
	l.mu.Lock()
	defer l.mu.Unlock()
	close(l.wake)
	l.wake = make(chan struct{})
}

const (
	reconnectMin = 100 * time.Millisecond
	reconnectMax = 5 * time.Second
)

// Run listens until ctx ends, reconnecting with backoff whenever the
// connection fails; it returns nil once ctx ends.
func (l *Listener) Run(ctx context.Context) error {
	defer close(l.done)
	backoff := reconnectMin
	for ctx.Err() == nil {
		err := l.session(ctx, func() { backoff = reconnectMin })
		if ctx.Err() != nil {
			return nil
		}
		l.log.Warn("events listener lost its connection; reconnecting", zap.Duration("backoff", backoff), zap.Error(err))
		sleep(ctx, backoff)
		backoff = min(2*backoff, reconnectMax)
		// No commit is heard while the listener is down: waiters read
		// again at each try (every few seconds at most), rather than wait
		// out their whole long poll for events already there.
		l.broadcast()
	}
	return nil
}

// session connects, listens and wakes waiters on every notification until
// the connection fails or ctx ends. listening is called once LISTEN holds.
func (l *Listener) session(ctx context.Context, listening func()) error {
	cfg, err := dburl.SessionConfig(l.databaseURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if err := pgstore.Listen(ctx, conn); err != nil {
		return err
	}
	listening()
	// Events may have committed while nobody listened.
	l.broadcast()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		l.broadcast()
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
