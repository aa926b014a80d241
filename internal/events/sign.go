package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a webhook request, as the Standard Webhooks specification
// names them (https://www.standardwebhooks.com/).
const (
	// IDHeader is the event's id, as in the body: the same on every attempt.
	IDHeader = "webhook-id"
	// TimestampHeader is the attempt's time in Unix seconds.
	TimestampHeader = "webhook-timestamp"
	// SignatureHeader is "v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">",
	// one per key, space-separated.
	SignatureHeader = "webhook-signature"
)

// The headers sent before Standard Webhooks. Deprecated: they are sent for
// one more release, alongside the standard ones.
const (
	// LegacySignatureHeader is "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// "<t>.<body>">", with a v1 per key.
	LegacySignatureHeader = "Redpacket-Signature"
	// LegacyEventIDHeader is the event's id, as IDHeader.
	LegacyEventIDHeader = "Redpacket-Event-Id"
)

// ErrBadSignature means a webhook request's signature does not verify.
var ErrBadSignature = errors.New("webhook signature does not verify")

// Sign returns the webhook-signature value of the message id with body sent
// at t: a "v1,<base64>" signature per key, space-separated.
func Sign(keys [][]byte, id string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(mac(k, id+"."+ts+".", body))
	}
	return strings.Join(sigs, " ")
}

// SignLegacy returns the deprecated Redpacket-Signature value of body sent
// at t: "t=<t>" then a "v1=<hex>" per key.
func SignLegacy(keys [][]byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.WriteString("t=" + ts)
	for _, k := range keys {
		b.WriteString(",v1=" + hex.EncodeToString(mac(k, ts+".", body)))
	}
	return b.String()
}

func mac(key []byte, prefix string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(prefix))
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a request's Standard Webhooks headers against body, as a
// receiver holding key does: some v1 signature must be the HMAC of
// "<id>.<timestamp>.<body>", and the timestamp within tolerance of now (a
// replayed old request fails; 0 skips the check).
func Verify(key []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, ts := h.Get(IDHeader), h.Get(TimestampHeader)
	if id == "" || strings.Contains(id, ".") {
		return fmt.Errorf("%w: missing or malformed %s", ErrBadSignature, IDHeader)
	}
	if err := checkTime(ts, now, tolerance); err != nil {
		return err
	}
	want := mac(key, id+"."+ts+".", body)
	for _, s := range strings.Fields(h.Get(SignatureHeader)) {
		v, sig, _ := strings.Cut(s, ",")
		if b, err := base64.StdEncoding.DecodeString(sig); v == "v1" && err == nil && hmac.Equal(b, want) {
			return nil
		}
	}
	return ErrBadSignature
}

// VerifyLegacy checks a deprecated Redpacket-Signature value against body,
// as a receiver holding key does: some v1 value must be the HMAC of
// "<t>.<body>", and t within tolerance of now (0 skips the check).
func VerifyLegacy(key []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	if len(sigs) == 0 {
		return fmt.Errorf("%w: malformed header", ErrBadSignature)
	}
	if err := checkTime(ts, now, tolerance); err != nil {
		return err
	}
	want := mac(key, ts+".", body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return ErrBadSignature
}

// checkTime parses a Unix-seconds timestamp and checks it is within
// tolerance of now (0: any time).
func checkTime(ts string, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: malformed timestamp", ErrBadSignature)
	}
	if d := now.Sub(time.Unix(sec, 0)); tolerance > 0 && (d > tolerance || d < -tolerance) {
		return fmt.Errorf("%w: timestamp outside the tolerance", ErrBadSignature)
	}
	return nil
}
