package events_test

import (
	"errors"
	"testing"
	"time"

	"redpacket/internal/events"
)

func TestSignKnownValue(t *testing.T) {
	t.Parallel()
	// echo -n '1700000000.{"id":1}' | openssl dgst -sha256 -hmac 'whsec-test-secret-0123'
	got := events.Sign([]byte("whsec-test-secret-0123"), time.Unix(1700000000, 0), []byte(`{"id":1}`))
	want := "t=1700000000,v1=1ae16165b972fa19b84e1ab8f0c98c2d8ff978219c8160ca01b8a4ec0ffe31ed"
	if got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	secret, body := []byte("whsec-test-secret-0123"), []byte(`{"id":7,"type":"packet.claimed"}`)
	at := time.Unix(1800000000, 0)
	header := events.Sign(secret, at, body)
	if err := events.Verify(secret, header, body, at.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatalf("Verify of a good signature: %v", err)
	}
	// A second v1 (a rotated secret) is accepted alongside.
	if err := events.Verify(secret, "v1=00ff,"+header, body, at, 0); err != nil {
		t.Errorf("Verify with an extra v1: %v", err)
	}
	for name, c := range map[string]struct {
		secret, body []byte
		header       string
		now          time.Time
	}{
		"wrong secret":    {[]byte("another secret"), body, header, at},
		"changed body":    {secret, []byte(`{"id":8,"type":"packet.claimed"}`), header, at},
		"too old":         {secret, body, header, at.Add(6 * time.Minute)},
		"from the future": {secret, body, header, at.Add(-6 * time.Minute)},
		"no timestamp":    {secret, body, header[len("t=1800000000,"):], at},
		"no signature":    {secret, body, "t=1800000000", at},
		"other time":      {secret, body, "t=1800000001" + header[len("t=1800000000"):], at},
		"empty":           {secret, body, "", at},
	} {
		if err := events.Verify(c.secret, c.header, c.body, c.now, 5*time.Minute); !errors.Is(err, events.ErrBadSignature) {
			t.Errorf("%s: Verify = %v, want ErrBadSignature", name, err)
		}
	}
}
