package config

import (
	"strings"
	"testing"
	"time"
)

func TestEventsDefaults(t *testing.T) {
	e, err := LoadEvents(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if e.WebhookEnabled() || e.WebhookTimeout != 5*time.Second || e.WebhookMaxBackoff != 5*time.Minute ||
		e.WebhookWorkers != 4 || e.Retention != 168*time.Hour {
		t.Errorf("defaults: %+v", e)
	}
}

func TestEventsWebhook(t *testing.T) {
	e, err := LoadEvents(env(map[string]string{
		"WEBHOOK_URL": "https://backend.example/hooks/redpacket", "WEBHOOK_SECRET": "0123456789abcdef",
		"WEBHOOK_TIMEOUT": "2s", "WEBHOOK_MAX_BACKOFF": "1m", "WEBHOOK_WORKERS": "8", "EVENTS_RETENTION": "24h",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !e.WebhookEnabled() || e.WebhookSecret != "0123456789abcdef" || e.WebhookTimeout != 2*time.Second ||
		e.WebhookMaxBackoff != time.Minute || e.WebhookWorkers != 8 || e.Retention != 24*time.Hour {
		t.Errorf("settings: %+v", e)
	}
}

// A webhook needs a usable URL and a secret; the secret never appears in
// the error.
func TestEventsBadValues(t *testing.T) {
	for name, c := range map[string]struct {
		vars map[string]string
		want string
	}{
		"no secret":    {map[string]string{"WEBHOOK_URL": "http://h/x"}, "WEBHOOK_SECRET"},
		"short secret": {map[string]string{"WEBHOOK_URL": "http://h/x", "WEBHOOK_SECRET": "hunter2"}, "WEBHOOK_SECRET"},
		"relative url": {map[string]string{"WEBHOOK_URL": "/hooks", "WEBHOOK_SECRET": "0123456789abcdef"}, "WEBHOOK_URL="},
		"ftp url":      {map[string]string{"WEBHOOK_URL": "ftp://h/x", "WEBHOOK_SECRET": "0123456789abcdef"}, "WEBHOOK_URL="},
		"timeout":      {map[string]string{"WEBHOOK_TIMEOUT": "-1s"}, "WEBHOOK_TIMEOUT="},
		"backoff":      {map[string]string{"WEBHOOK_MAX_BACKOFF": "often"}, "WEBHOOK_MAX_BACKOFF="},
		"workers":      {map[string]string{"WEBHOOK_WORKERS": "65"}, "WEBHOOK_WORKERS="},
		"retention":    {map[string]string{"EVENTS_RETENTION": "0"}, "EVENTS_RETENTION="},
	} {
		_, err := LoadEvents(env(c.vars))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %s", name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: the error repeats the secret: %v", name, err)
		}
	}
}
