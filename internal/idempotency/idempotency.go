// Package idempotency is what makes a create safe to retry: the
// Idempotency-Key header's rules, the fingerprint of a request that a repeat
// must match, and the errors a repeat may meet. The keys are stored with
// their envelopes in PostgreSQL (pgstore); the grab service decides what a
// repeat gets.
package idempotency

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"time"
)

// The headers of an idempotent request and of its replayed answer.
const (
	Header         = "Idempotency-Key"
	ReplayedHeader = "Idempotent-Replayed"
)

// MaxKeyLen is the longest key accepted.
const MaxKeyLen = 255

// DefaultTTL is how long a key is remembered unless configured.
const DefaultTTL = 24 * time.Hour

var (
	// ErrInvalidKey: the header is empty, too long, sent twice, or holds
	// characters other than visible ASCII.
	ErrInvalidKey = errors.New("invalid idempotency key")
	// ErrMismatch: the key was used with another request body.
	ErrMismatch = errors.New("idempotency key was used with another request")
	// ErrInProgress: the create that first used the key has not finished.
	ErrInProgress = errors.New("a request with this idempotency key is still being processed")
)

// Request is an idempotent request: its key and its body's fingerprint.
type Request struct {
	Key         string
	Fingerprint []byte
}

// Answer is an answer to an idempotent request, exactly as sent.
type Answer struct {
	Status   int
	Body     []byte
	Replayed bool // a repeat's: the first request's answer, sent again
}

// ParseKey reads the header's values (as http.Header holds them): present
// is false without the header; a header present must be one value of 1 to
// MaxKeyLen visible ASCII characters (0x21-0x7E).
func ParseKey(values []string) (key string, present bool, err error) {
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", true, fmt.Errorf("%w: %s is given %d times", ErrInvalidKey, Header, len(values))
	}
	key = values[0]
	if len(key) == 0 || len(key) > MaxKeyLen {
		return "", true, fmt.Errorf("%w: %s must be 1 to %d characters", ErrInvalidKey, Header, MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < '!' || key[i] > '~' {
			return "", true, fmt.Errorf("%w: %s may hold only visible ASCII characters", ErrInvalidKey, Header)
		}
	}
	return key, true, nil
}

// Fingerprint is the SHA-256 of a request body: a repeat must send the same
// bytes.
func Fingerprint(body []byte) []byte {
	sum := sha256.Sum256(body)
	return sum[:]
}
