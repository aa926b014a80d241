package events_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"redpacket/internal/events"
)

// The specification's published example: its Go library's signing test.
const (
	specSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specBody   = `{"test": 2432232314}`
	specSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

var specTime = time.Unix(1614265330, 0)

func specKey(t *testing.T) []byte {
	t.Helper()
	// A receiver's library decodes the secret; so does the config package.
	wh, err := standardwebhooks.NewWebhook(specSecret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(specID, specTime, []byte(specBody))
	if err != nil || sig != specSig {
		t.Fatalf("the library signs the example as %q (%v), want %q", sig, err, specSig)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(specSecret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestSignSpecificationExample(t *testing.T) {
	t.Parallel()
	key := specKey(t)
	if got := events.Sign([][]byte{key}, specID, specTime, []byte(specBody)); got != specSig {
		t.Errorf("Sign = %s, want %s", got, specSig)
	}
	// Two keys (a rotation): a signature of each, space-separated, in order.
	other := []byte("another-key-0123456789abcdef")
	got := events.Sign([][]byte{other, key}, specID, specTime, []byte(specBody))
	first, second, _ := strings.Cut(got, " ")
	if second != specSig || first != events.Sign([][]byte{other}, specID, specTime, []byte(specBody)) || first == specSig {
		t.Errorf("Sign with two keys = %q, want the other key's signature, a space, then %s", got, specSig)
	}
}

// The deprecated header is what it was: the same key signs it as before.
func TestSignLegacyKnownValue(t *testing.T) {
	t.Parallel()
	// echo -n '1700000000.{"id":1}' | openssl dgst -sha256 -hmac 'whsec-test-secret-0123'
	key := []byte("whsec-test-secret-0123")
	got := events.SignLegacy([][]byte{key}, time.Unix(1700000000, 0), []byte(`{"id":1}`))
	want := "t=1700000000,v1=1ae16165b972fa19b84e1ab8f0c98c2d8ff978219c8160ca01b8a4ec0ffe31ed"
	if got != want {
		t.Errorf("SignLegacy = %s, want %s", got, want)
	}
	two := events.SignLegacy([][]byte{key, []byte("another-key-0123456789abcdef")}, time.Unix(1700000000, 0), []byte(`{"id":1}`))
	if !strings.HasPrefix(two, want+",v1=") || len(two) != len(want)+len(",v1=")+64 {
		t.Errorf("SignLegacy with two keys = %s, want %s then a second v1", two, want)
	}
}

// headers are a request's Standard Webhooks headers, as the sender sets them.
func headers(id string, at time.Time, sig string) http.Header {
	h := http.Header{}
	h.Set(events.IDHeader, id)
	h.Set(events.TimestampHeader, strconv.FormatInt(at.Unix(), 10))
	h.Set(events.SignatureHeader, sig)
	return h
}

func TestVerify(t *testing.T) {
	t.Parallel()
	key, other := []byte("the-receivers-key-0123456789"), []byte("another-key-0123456789abcdef")
	body := []byte(`{"id":7,"type":"packet.claimed"}`)
	at := time.Unix(1800000000, 0)
	good := headers("7", at, events.Sign([][]byte{key}, "7", at, body))
	if err := events.Verify(key, good, body, at.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatalf("Verify of a good signature: %v", err)
	}
	// A rotation: either key verifies a request signed with both.
	both := headers("7", at, events.Sign([][]byte{other, key}, "7", at, body))
	for _, k := range [][]byte{key, other} {
		if err := events.Verify(k, both, body, at, 0); err != nil {
			t.Errorf("Verify of a request signed with two keys: %v", err)
		}
	}
	with := func(name, value string) http.Header {
		h := good.Clone()
		h.Set(name, value)
		return h
	}
	for name, c := range map[string]struct {
		key  []byte
		h    http.Header
		body []byte
		now  time.Time
	}{
		"wrong key":         {other, good, body, at},
		"changed body":      {key, good, []byte(`{"id":8,"type":"packet.claimed"}`), at},
		"too old":           {key, good, body, at.Add(6 * time.Minute)},
		"from the future":   {key, good, body, at.Add(-6 * time.Minute)},
		"other id":          {key, with(events.IDHeader, "8"), body, at},
		"other time":        {key, with(events.TimestampHeader, "1800000001"), body, at},
		"no id":             {key, with(events.IDHeader, ""), body, at},
		"no timestamp":      {key, with(events.TimestampHeader, ""), body, at},
		"no signature":      {key, with(events.SignatureHeader, ""), body, at},
		"other version":     {key, with(events.SignatureHeader, "v1a"+good.Get(events.SignatureHeader)[2:]), body, at},
		"hex not base64":    {key, with(events.SignatureHeader, "v1,00ff"), body, at},
		"dot in the id":     {key, with(events.IDHeader, "7.1800000000"), body, at},
		"timestamp not int": {key, with(events.TimestampHeader, "soon"), body, at},
	} {
		if err := events.Verify(c.key, c.h, c.body, c.now, 5*time.Minute); !errors.Is(err, events.ErrBadSignature) {
			t.Errorf("%s: Verify = %v, want ErrBadSignature", name, err)
		}
	}
}

// Our Sign and Verify agree with the specification's library both ways.
func TestSignAgreesWithLibrary(t *testing.T) {
	t.Parallel()
	key := []byte("the-receivers-key-0123456789")
	wh, err := standardwebhooks.NewWebhookRaw(key)
	if err != nil {
		t.Fatal(err)
	}
	body, now := []byte(`{"id":9,"type":"envelope.settled"}`), time.Now()
	ours := headers("9", now, events.Sign([][]byte{[]byte("another-key-0123456789abcdef"), key}, "9", now, body))
	if err := wh.Verify(body, ours); err != nil {
		t.Errorf("the library refuses our signature: %v", err)
	}
	sig, err := wh.Sign("9", now, body)
	if err != nil {
		t.Fatal(err)
	}
	if err := events.Verify(key, headers("9", now, sig), body, now, time.Minute); err != nil {
		t.Errorf("Verify refuses the library's signature: %v", err)
	}
}

func TestVerifyLegacy(t *testing.T) {
	t.Parallel()
	key, body := []byte("whsec-test-secret-0123"), []byte(`{"id":7,"type":"packet.claimed"}`)
	at := time.Unix(1800000000, 0)
	header := events.SignLegacy([][]byte{key}, at, body)
	if err := events.VerifyLegacy(key, header, body, at.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatalf("VerifyLegacy of a good signature: %v", err)
	}
	// A rotation: either key verifies a header signed with both.
	other := []byte("another secret")
	both := events.SignLegacy([][]byte{other, key}, at, body)
	for _, k := range [][]byte{key, other} {
		if err := events.VerifyLegacy(k, both, body, at, 0); err != nil {
			t.Errorf("VerifyLegacy of a header signed with two keys: %v", err)
		}
	}
	for name, c := range map[string]struct {
		key, body []byte
		header    string
		now       time.Time
	}{
		"wrong key":       {other, body, header, at},
		"changed body":    {key, []byte(`{"id":8,"type":"packet.claimed"}`), header, at},
		"too old":         {key, body, header, at.Add(6 * time.Minute)},
		"from the future": {key, body, header, at.Add(-6 * time.Minute)},
		"no timestamp":    {key, body, header[len("t=1800000000,"):], at},
		"no signature":    {key, body, "t=1800000000", at},
		"other time":      {key, body, "t=1800000001" + header[len("t=1800000000"):], at},
		"empty":           {key, body, "", at},
	} {
		if err := events.VerifyLegacy(c.key, c.header, c.body, c.now, 5*time.Minute); !errors.Is(err, events.ErrBadSignature) {
			t.Errorf("%s: VerifyLegacy = %v, want ErrBadSignature", name, err)
		}
	}
}
