package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The headers of a webhook request.
const (
	// SignatureHeader is "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">".
	SignatureHeader = "Redpacket-Signature"
	// EventIDHeader is the event's id, as in the body.
	EventIDHeader = "Redpacket-Event-Id"
)

// ErrBadSignature means a webhook request's signature does not verify.
var ErrBadSignature = errors.New("webhook signature does not verify")

// Sign returns the signature header of body sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a signature header against body, as a receiver does: some
// v1 value must be the HMAC of "<t>.<body>", and t must be within tolerance
// of now (a replayed old request fails; 0 skips the check).
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
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
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: malformed header", ErrBadSignature)
	}
	if d := now.Sub(time.Unix(sec, 0)); tolerance > 0 && (d > tolerance || d < -tolerance) {
		return fmt.Errorf("%w: timestamp outside the tolerance", ErrBadSignature)
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return ErrBadSignature
}
