package config

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// whsec is the whsec_ form of key.
func whsec(key string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(key)) }

const (
	oldKey = "old-key-0123456789abcdef" // 24 bytes: the shortest allowed
	newKey = "new-key-0123456789abcdef0123456789abcdef"
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
		"WEBHOOK_URL": "https://backend.example/hooks/redpacket", "WEBHOOK_SECRET": whsec(oldKey),
		"WEBHOOK_TIMEOUT": "2s", "WEBHOOK_MAX_BACKOFF": "1m", "WEBHOOK_WORKERS": "8", "EVENTS_RETENTION": "24h",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !e.WebhookEnabled() || len(e.WebhookKeys) != 1 || string(e.WebhookKeys[0]) != oldKey ||
		e.WebhookTimeout != 2*time.Second || e.WebhookMaxBackoff != time.Minute || e.WebhookWorkers != 8 ||
		e.Retention != 24*time.Hour {
		t.Errorf("settings: %+v", e)
	}
}

// During a rotation WEBHOOK_SECRET holds two secrets; both keys sign.
func TestEventsWebhookRotation(t *testing.T) {
	// The specification's own example secret decodes as its libraries do.
	spec, _ := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	for v, want := range map[string][]string{
		whsec(oldKey) + " " + whsec(newKey):         {oldKey, newKey},
		"  " + whsec(newKey) + "  " + whsec(oldKey): {newKey, oldKey},
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw":    {string(spec)},
	} {
		e, err := LoadEvents(env(map[string]string{"WEBHOOK_URL": "http://h/x", "WEBHOOK_SECRET": v}))
		if err != nil {
			t.Errorf("%q: %v", v, err)
			continue
		}
		if len(e.WebhookKeys) != len(want) {
			t.Errorf("%q: %d keys, want %d", v, len(e.WebhookKeys), len(want))
			continue
		}
		for i, k := range e.WebhookKeys {
			if !bytes.Equal(k, []byte(want[i])) {
				t.Errorf("%q: key %d is %q, want %q", v, i, k, want[i])
			}
		}
	}
}

// A webhook needs a usable URL and a secret in the whsec_ form of 24 to 64
// bytes; a bad secret is refused with a message naming WEBHOOK_SECRET and
// saying what to do, and never quoting the secret.
func TestEventsBadValues(t *testing.T) {
	const plain = "hunter2-hunter2-hunter2-hunter2" // the form used before: refused
	hook := func(secret string) map[string]string {
		return map[string]string{"WEBHOOK_URL": "http://h/x", "WEBHOOK_SECRET": secret}
	}
	for name, c := range map[string]struct {
		vars map[string]string
		want []string
	}{
		"no secret":       {map[string]string{"WEBHOOK_URL": "http://h/x"}, []string{"WEBHOOK_SECRET: required", "openssl rand"}},
		"blank secret":    {hook("   "), []string{"WEBHOOK_SECRET: required"}},
		"old form":        {hook(plain), []string{"WEBHOOK_SECRET: the secret is not in the whsec_", "openssl base64 -A"}},
		"old form second": {hook(whsec(oldKey) + " " + plain), []string{"WEBHOOK_SECRET: the second secret is not in the whsec_"}},
		"bad base64":      {hook("whsec_" + plain), []string{"WEBHOOK_SECRET: the secret is not valid standard base64"}},
		"unpadded":        {hook(strings.TrimRight(whsec(oldKey+"x"), "=")), []string{"WEBHOOK_SECRET: the secret is not valid standard base64"}},
		"short key":       {hook(whsec(oldKey[1:])), []string{"WEBHOOK_SECRET: the secret decodes to a key of 23 bytes"}},
		"long key":        {hook(whsec(strings.Repeat("k", 65))), []string{"WEBHOOK_SECRET: the secret decodes to a key of 65 bytes"}},
		"three secrets":   {hook(whsec(oldKey) + " " + whsec(newKey) + " " + whsec(plain)), []string{"WEBHOOK_SECRET: holds 3 secrets"}},
		"relative url":    {map[string]string{"WEBHOOK_URL": "/hooks", "WEBHOOK_SECRET": whsec(oldKey)}, []string{"WEBHOOK_URL="}},
		"ftp url":         {map[string]string{"WEBHOOK_URL": "ftp://h/x", "WEBHOOK_SECRET": whsec(oldKey)}, []string{"WEBHOOK_URL="}},
		"timeout":         {map[string]string{"WEBHOOK_TIMEOUT": "-1s"}, []string{"WEBHOOK_TIMEOUT="}},
		"backoff":         {map[string]string{"WEBHOOK_MAX_BACKOFF": "often"}, []string{"WEBHOOK_MAX_BACKOFF="}},
		"workers":         {map[string]string{"WEBHOOK_WORKERS": "65"}, []string{"WEBHOOK_WORKERS="}},
		"retention":       {map[string]string{"EVENTS_RETENTION": "0"}, []string{"EVENTS_RETENTION="}},
	} {
		_, err := LoadEvents(env(c.vars))
		if err == nil {
			t.Errorf("%s: no error, want one saying %q", name, c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q, want one saying %q", name, err, w)
			}
		}
		for _, s := range []string{plain, whsec(oldKey), oldKey, whsec(newKey)} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: the error repeats a secret: %v", name, err)
			}
		}
	}
}

// The conversion the error message gives keeps the key of a secret of the
// old form (used as the HMAC key as it was), so the deprecated signature
// header is unchanged for receivers still checking it.
func TestEventsOldSecretConversion(t *testing.T) {
	old := "an-old-secret-of-the-old-form-0123" // as today's receivers hold it
	e, err := LoadEvents(env(map[string]string{"WEBHOOK_URL": "http://h/x", "WEBHOOK_SECRET": whsec(old)}))
	if err != nil {
		t.Fatal(err)
	}
	if string(e.WebhookKeys[0]) != old {
		t.Errorf("converted key %q, want the old secret's bytes %q", e.WebhookKeys[0], old)
	}
}

func TestDefaultEvents(t *testing.T) {
	if _, err := LoadEvents(func(string) string { return "" }); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	d := DefaultEvents()
	if d.WebhookTimeout != 5*time.Second || d.WebhookMaxBackoff != 5*time.Minute || d.WebhookWorkers != 4 {
		t.Errorf("DefaultEvents = %+v", d)
	}
}

// The ledger retention may not be shorter than EVENTS_RETENTION: archiving
// an envelope deletes its events, which feed readers are promised for
// EVENTS_RETENTION. 0 (the ledger kept for ever) is fine.
func TestLedgerRetentionKeepsEventsAsLongAsTheirs(t *testing.T) {
	ev := Events{Retention: 168 * time.Hour}
	for age, ok := range map[time.Duration]bool{0: true, 168 * time.Hour: true, 2160 * time.Hour: true, 24 * time.Hour: false} {
		if err := CheckRetentions(age, ev); (err == nil) != ok {
			t.Errorf("ledger retention %s beside EVENTS_RETENTION 168h: %v, want accepted %v", age, err, ok)
		}
	}
}
