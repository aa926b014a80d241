package config

import (
	"errors"
	"net/url"
	"strconv"
	"time"
)

// Events holds the settings of the events the flusher writes: the webhook
// that pushes them (off unless WebhookURL is set) and their retention. The
// README lists them with the others.
type Events struct {
	WebhookURL        string
	WebhookSecret     string
	WebhookTimeout    time.Duration
	WebhookMaxBackoff time.Duration
	WebhookWorkers    int
	Retention         time.Duration
}

// minSecretLen keeps a webhook secret from being guessable.
const minSecretLen = 16

// LoadEvents reads the events settings through getenv.
func LoadEvents(getenv func(string) string) (Events, error) {
	r := reader{getenv: getenv}
	e := Events{
		WebhookURL:        r.str("WEBHOOK_URL", ""),
		WebhookSecret:     getenv("WEBHOOK_SECRET"),
		WebhookTimeout:    r.duration("WEBHOOK_TIMEOUT", 5*time.Second),
		WebhookMaxBackoff: r.duration("WEBHOOK_MAX_BACKOFF", 5*time.Minute),
		WebhookWorkers:    r.int("WEBHOOK_WORKERS", 4),
		Retention:         r.duration("EVENTS_RETENTION", 168*time.Hour),
	}
	if e.WebhookURL != "" {
		if u, err := url.Parse(e.WebhookURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			r.fail("WEBHOOK_URL", e.WebhookURL, "must be an absolute http:// or https:// URL")
		}
		if len(e.WebhookSecret) < minSecretLen {
			// The value is a secret: not repeated in the message.
			r.errs = append(r.errs, errors.New("WEBHOOK_SECRET: required when WEBHOOK_URL is set, at least "+
				strconv.Itoa(minSecretLen)+" characters"))
		}
	}
	if e.WebhookWorkers > 64 {
		r.fail("WEBHOOK_WORKERS", strconv.Itoa(e.WebhookWorkers), "must be between 1 and 64")
	}
	return e, errors.Join(r.errs...)
}

// WebhookEnabled reports whether events are pushed to a receiver.
func (e Events) WebhookEnabled() bool { return e.WebhookURL != "" }
