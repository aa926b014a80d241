package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Events holds the settings of the events the flusher writes: the webhook
// that pushes them (off unless WebhookURL is set) and their retention. The
// README lists them with the others.
type Events struct {
	WebhookURL string
	// WebhookKeys are the HMAC keys of the webhook signatures: one, or two
	// while the secret is being rotated (every delivery is signed with each).
	WebhookKeys       [][]byte
	WebhookTimeout    time.Duration
	WebhookMaxBackoff time.Duration
	WebhookWorkers    int
	Retention         time.Duration
}

// A webhook secret is written as the Standard Webhooks specification
// serializes it: whsec_ then the base64 of a random key of 24 to 64 bytes
// (192 to 512 bits).
const (
	secretPrefix = "whsec_"
	minKeyLen    = 24
	maxKeyLen    = 64
)

// DefaultEvents are the events settings when none is set.
func DefaultEvents() Events {
	e, _ := LoadEvents(func(string) string { return "" }) // the defaults are valid (TestDefaultEvents)
	return e
}

// LoadEvents reads the events settings through getenv.
func LoadEvents(getenv func(string) string) (Events, error) {
	r := reader{getenv: getenv}
	e := Events{
		WebhookURL:        r.str("WEBHOOK_URL", ""),
		WebhookTimeout:    r.duration("WEBHOOK_TIMEOUT", 5*time.Second),
		WebhookMaxBackoff: r.duration("WEBHOOK_MAX_BACKOFF", 5*time.Minute),
		WebhookWorkers:    r.int("WEBHOOK_WORKERS", 4),
		Retention:         r.duration("EVENTS_RETENTION", 168*time.Hour),
	}
	if e.WebhookURL != "" {
		if u, err := url.Parse(e.WebhookURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			// Shown masked: the URL may carry credentials.
			r.failURL("WEBHOOK_URL", e.WebhookURL, "must be an absolute http:// or https:// URL")
		}
		keys, err := webhookKeys(getenv("WEBHOOK_SECRET"))
		if err != nil {
			// The value is a secret: never repeated in the message.
			r.errs = append(r.errs, fmt.Errorf("WEBHOOK_SECRET: %w", err))
		}
		e.WebhookKeys = keys
	}
	return e, errors.Join(r.errs...)
}

// webhookKeys decodes WEBHOOK_SECRET: one whsec_ secret, or two separated
// by a space during a rotation. Its errors never quote the value.
func webhookKeys(v string) ([][]byte, error) {
	secrets := strings.Fields(v)
	switch {
	case len(secrets) == 0:
		return nil, errors.New("required when WEBHOOK_URL is set: whsec_ then the base64 of a random key of " +
			"24 to 64 bytes, e.g. whsec_$(openssl rand -base64 32)")
	case len(secrets) > 2:
		return nil, fmt.Errorf("holds %d secrets; at most two (the old and the new, separated by a space, "+
			"while rotating)", len(secrets))
	}
	var keys [][]byte
	for i, s := range secrets {
		which := "the secret"
		if len(secrets) == 2 {
			which = [...]string{"the first secret", "the second secret"}[i]
		}
		key, err := decodeSecret(s)
		if err != nil {
			return nil, fmt.Errorf("%s %w", which, err)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// decodeSecret returns the key of a whsec_ secret. A secret of the form
// used before (any string of 16 characters or more, used as the key as it
// is) is refused with the way to convert it that keeps its key, so that
// receivers still checking Redpacket-Signature need no change.
func decodeSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, errors.New(`is not in the whsec_<base64> form of Standard Webhooks. An old-form secret ` +
			`of 24 to 64 bytes converts with its key unchanged (receivers of Redpacket-Signature need no ` +
			`change): WEBHOOK_SECRET=whsec_$(printf %s "$OLD_SECRET" | openssl base64 -A); a shorter one ` +
			`must be replaced, e.g. by whsec_$(openssl rand -base64 32)`)
	}
	// Standard base64 with padding: what the specification's libraries
	// decode, so that receivers given the same string get the same key.
	key, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil {
		return nil, errors.New("is not valid standard base64 (with = padding) after whsec_")
	}
	if len(key) < minKeyLen || len(key) > maxKeyLen {
		return nil, fmt.Errorf("decodes to a key of %d bytes; the specification wants 24 to 64 bytes "+
			"(e.g. whsec_$(openssl rand -base64 32))", len(key))
	}
	return key, nil
}

// WebhookEnabled reports whether events are pushed to a receiver.
func (e Events) WebhookEnabled() bool { return e.WebhookURL != "" }

// CheckRetentions refuses a ledger retention (LEDGER_RETENTION, or a
// command's -older-than: age) shorter than EVENTS_RETENTION: archiving an
// envelope deletes its events with it, so a feed reader the documentation
// gives EVENTS_RETENTION to catch up would miss events younger than that.
// An envelope's events are never younger than its settlement, so an age of
// at least EVENTS_RETENTION keeps every event that long.
func CheckRetentions(age time.Duration, ev Events) error {
	if age != 0 && age < ev.Retention {
		return fmt.Errorf("the ledger retention (%s) is shorter than EVENTS_RETENTION (%s): "+
			"archiving an envelope deletes its events, which feed readers are promised for EVENTS_RETENTION",
			shortDuration(age), shortDuration(ev.Retention))
	}
	return nil
}
