package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
)

// cryptoRequestID is newRequestID with crypto/rand, the reference of
// BenchmarkRequestID.
func cryptoRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	var out [32]byte
	hex.Encode(out[:], b[:])
	return string(out[:])
}

// BenchmarkRequestID compares making a request id from the runtime's
// generator (what the API does) with crypto/rand, in parallel as requests
// make them.
func BenchmarkRequestID(b *testing.B) {
	for _, c := range []struct {
		name string
		f    func() string
	}{{"math_rand_v2", newRequestID}, {"crypto_rand", cryptoRequestID}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_ = c.f()
				}
			})
		})
	}
}

func TestNewRequestIDsDiffer(t *testing.T) {
	seen := map[string]bool{}
	for range 100_000 {
		id := newRequestID()
		if len(id) != 32 || !validRequestID(id) || seen[id] {
			t.Fatalf("id %q: wrong shape or seen before", id)
		}
		seen[id] = true
	}
}
