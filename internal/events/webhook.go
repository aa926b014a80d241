package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/config"
	"redpacket/internal/graceful"
	"redpacket/internal/pgstore"
	"redpacket/internal/redact"
	"redpacket/internal/telemetry"
)

// WebhookConfig configures the webhook sender; zero fields take defaults.
type WebhookConfig struct {
	URL string
	// Keys sign every request: one, or two (the old and the new) while the
	// secret is rotated, each giving a signature of its own.
	Keys [][]byte
	// Timeout bounds one request, answer included (default 5s).
	Timeout time.Duration
	// MinBackoff is the pause after an envelope's first failed attempt; it
	// doubles with each further failure, up to MaxBackoff (defaults 1s, 5m).
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// Workers is how many envelopes are sent to at once (default 4): a
	// receiver that hangs on one envelope holds one worker, not the others.
	Workers int
	// Poll is how often due retries are looked for when no event commits
	// meanwhile (default 1s).
	Poll time.Duration
	// PerTurn is how many events of one envelope a worker sends before it
	// lets other envelopes have the worker (default 100).
	PerTurn int
	// StopGrace is how long a request in flight when the sender is told to
	// stop may go on, within Timeout (0: Timeout): answered, it is recorded
	// as delivered, and not sent again after a restart.
	StopGrace time.Duration
}

func (c WebhookConfig) withDefaults() WebhookConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	// The settings' defaults are config's (WEBHOOK_TIMEOUT, ...), kept
	// there once; the rest are this sender's own knobs.
	settings := config.DefaultEvents()
	def(&c.Timeout, settings.WebhookTimeout)
	def(&c.MinBackoff, time.Second)
	def(&c.MaxBackoff, settings.WebhookMaxBackoff)
	def(&c.Poll, time.Second)
	if c.Workers <= 0 {
		c.Workers = settings.WebhookWorkers
	}
	if c.PerTurn <= 0 {
		c.PerTurn = 100
	}
	c.MinBackoff = min(c.MinBackoff, c.MaxBackoff)
	return c
}

// DeliveryStore keeps the delivery state (pgstore.Store).
type DeliveryStore interface {
	DeliveryHeads(ctx context.Context, afterEnvelope int64, skip []int64, limit int) ([]pgstore.Event, error)
	NextUndelivered(ctx context.Context, envelopeID int64) (int64, error)
	Deliver(ctx context.Context, id int64, maxSend time.Duration, send func(context.Context, pgstore.Event) error,
		retryIn func(failures int) time.Duration) (pgstore.Delivery, error, error)
}

// Webhook pushes events to a receiver: at least once, each envelope's in
// order (an event is sent only once the one before it was accepted),
// signed per Standard Webhooks, retrying with exponential backoff and
// jitter per envelope. All of its state is in PostgreSQL, so a restart
// resumes where it was: nothing accepted is sent again (but for a request
// in flight when the process died), and envelopes in backoff stay in
// backoff. Any number of processes may run one on the same database.
type Webhook struct {
	store    DeliveryStore
	listener *Listener // wakes the sender when events commit; nil: Poll only
	cfg      WebhookConfig
	client   *http.Client
	log      *zap.Logger
	now      func() time.Time

	cursor int64 // the last envelope given a turn: turns go round the envelopes
}

// NewWebhook returns a sender; Run starts it.
func NewWebhook(store DeliveryStore, listener *Listener, cfg WebhookConfig, log *zap.Logger) *Webhook {
	cfg = cfg.withDefaults()
	if log == nil {
		log = zap.NewNop()
	}
	client := &http.Client{
		Timeout: cfg.Timeout,
		// A redirect is an answer other than 2xx: the receiver's URL is
		// configured, not discovered.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Webhook{store: store, listener: listener, cfg: cfg, client: client, log: log, now: time.Now}
}

// turnDone is a worker's report: which envelope it is done with, and
// whether it changed anything (then there may be more to do at once).
type turnDone struct {
	envelope   int64
	progressed bool
}

// Looking for work costs a probe per envelope with undelivered events, which
// adds up while a receiver is down and every envelope waits in backoff. So a
// stream of commits does not turn into a stream of such queries: the next
// one waits at least minQueryGap, and ten times as long as the last took.
const (
	minQueryGap    = 20 * time.Millisecond
	queryGapFactor = 10
)

// Run sends until ctx ends, then waits for the requests in flight (each
// bounded by Timeout) and returns nil (a failed delivery is retried).
func (w *Webhook) Run(ctx context.Context) error {
	w.log.Info("webhook sender running", zap.String("url", redacted(w.cfg.URL)), zap.Int("workers", w.cfg.Workers),
		zap.Duration("timeout", w.cfg.Timeout), zap.Duration("max_backoff", w.cfg.MaxBackoff))
	busy := map[int64]bool{} // envelopes a worker of this process has
	done := make(chan turnDone)
	poll := time.NewTicker(w.cfg.Poll)
	defer poll.Stop()
	var nextQuery time.Time
	var soon <-chan time.Time
	look := true
	for {
		changed := w.changed()
		if look && len(busy) < w.cfg.Workers {
			if wait := time.Until(nextQuery); wait > 0 {
				soon = time.After(wait)
			} else {
				start := time.Now()
				w.dispatch(ctx, busy, done)
				nextQuery = start.Add(max(minQueryGap, queryGapFactor*time.Since(start)))
			}
		}
		look = false
		select {
		case <-ctx.Done():
			for len(busy) > 0 {
				delete(busy, (<-done).envelope)
			}
			w.log.Info("webhook sender stopped")
			return nil
		case d := <-done:
			delete(busy, d.envelope)
			look = d.progressed
		case <-changed:
			look = true
		case <-soon:
			soon, look = nil, true
		case <-poll.C:
			look = true
		}
	}
}

// redacted is the URL without the credentials and query values it may
// carry, for the log.
func redacted(raw string) string { return redact.URL(raw) }

func (w *Webhook) changed() <-chan struct{} {
	if w.listener == nil {
		return nil
	}
	return w.listener.Changed()
}

// dispatch gives free workers to envelopes whose next event is due.
func (w *Webhook) dispatch(ctx context.Context, busy map[int64]bool, done chan<- turnDone) {
	heads, err := w.heads(ctx, busy, w.cfg.Workers-len(busy))
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("webhook: cannot read the events to send; will retry", zap.Error(err))
		}
		return
	}
	for _, h := range heads {
		busy[h.EnvelopeID] = true
		go func() { done <- w.turn(ctx, h) }()
	}
}

// heads finds up to n envelopes with a due event, going round the
// envelopes from the one after the last given a turn, so that every
// envelope gets one in turn.
func (w *Webhook) heads(ctx context.Context, busy map[int64]bool, n int) ([]pgstore.Event, error) {
	skip := make([]int64, 0, len(busy)+n)
	for e := range busy {
		skip = append(skip, e)
	}
	hs, err := w.store.DeliveryHeads(ctx, w.cursor, skip, n)
	if err != nil {
		return nil, err
	}
	if len(hs) < n && w.cursor > 0 {
		for _, h := range hs {
			skip = append(skip, h.EnvelopeID)
		}
		more, err := w.store.DeliveryHeads(ctx, 0, skip, n-len(hs))
		if err != nil {
			return nil, err
		}
		hs = append(hs, more...)
	}
	w.cursor = 0
	if len(hs) > 0 {
		w.cursor = hs[len(hs)-1].EnvelopeID
	}
	return hs, nil
}

// turn sends an envelope's events in order, from head, until one fails,
// none is left, another sender has the envelope, or PerTurn were sent.
func (w *Webhook) turn(ctx context.Context, head pgstore.Event) turnDone {
	out := turnDone{envelope: head.EnvelopeID}
	id := head.ID
	for range w.cfg.PerTurn {
		if ctx.Err() != nil {
			return out
		}
		d, sendErr, err := w.deliver(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("webhook: delivery not recorded; will retry", zap.Int64("event_id", id), zap.Error(err))
			}
			return out
		}
		if d == pgstore.DeliveryFailed {
			deliveries.WithLabelValues(string(telemetry.WebhookFailed)).Inc()
			w.log.Warn("webhook delivery failed; will retry", zap.Int64("event_id", id),
				zap.Int64("envelope_id", head.EnvelopeID), zap.Error(sendErr))
			out.progressed = true
		}
		if d != pgstore.Delivered {
			return out
		}
		deliveries.WithLabelValues(string(telemetry.WebhookDelivered)).Inc()
		out.progressed = true
		if id, err = w.store.NextUndelivered(ctx, head.EnvelopeID); err != nil || id == 0 {
			return out
		}
	}
	return out
}

// recordTimeout bounds recording a delivery's outcome, after its request.
const recordTimeout = 5 * time.Second

// deliver sends event id and records the outcome (DeliveryStore.Deliver)
// on a context that outlives a stop for StopGrace: a request in flight
// when the flusher is told to stop is answered and recorded, not cut off
// and sent again after the restart.
func (w *Webhook) deliver(ctx context.Context, id int64) (pgstore.Delivery, error, error) {
	ctx, cancel := graceful.Detached(ctx, w.cfg.Timeout+recordTimeout, w.cfg.StopGrace)
	defer cancel()
	return w.store.Deliver(ctx, id, w.cfg.Timeout, w.send, w.retryIn)
}

// retryIn is the pause after an envelope's failures-th failed attempt in a
// row: MinBackoff doubled for each earlier failure, at most MaxBackoff, then
// drawn from its upper half so that envelopes that failed together do not
// all come back together.
func (w *Webhook) retryIn(failures int) time.Duration {
	d := w.cfg.MinBackoff
	for i := 1; i < failures && d < w.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, w.cfg.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// send posts one event and reports any answer but 2xx as an error.
func (w *Webhook) send(ctx context.Context, e pgstore.Event) error {
	body, err := json.Marshal(NewMessage(e))
	if err != nil {
		return fmt.Errorf("encode event %d: %w", e.ID, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("request for event %d: %w", e.ID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "redpacket-webhook/1")
	id, now := strconv.FormatInt(e.ID, 10), w.now()
	// The specification spells its headers in lower case; Go sends names
	// set directly in the map as they are.
	req.Header[IDHeader] = []string{id}
	req.Header[TimestampHeader] = []string{strconv.FormatInt(now.Unix(), 10)}
	req.Header[SignatureHeader] = []string{Sign(w.cfg.Keys, id, now, body)}
	req.Header.Set(LegacyEventIDHeader, id)
	req.Header.Set(LegacySignatureHeader, SignLegacy(w.cfg.Keys, now, body))
	resp, err := w.client.Do(req)
	if err != nil {
		// The client's error names the URL (with the password starred
		// but the query whole): it is logged, so it names it redacted.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = redacted(ue.URL)
		}
		return fmt.Errorf("post event %d: %w", e.ID, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("post event %d: receiver answered %s", e.ID, resp.Status)
	}
	return nil
}
