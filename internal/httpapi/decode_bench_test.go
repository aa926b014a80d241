package httpapi

import "testing"

// BenchmarkDecodeGrab measures reading a grab body: the plain shape the
// fast path reads, and the same body with a space, which the strict decoder
// reads.
func BenchmarkDecodeGrab(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"plain", `{"user_id":"u-12345678"}`},
		{"decoder", `{"user_id": "u-12345678"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			body := []byte(bc.body)
			b.ReportAllocs()
			for b.Loop() {
				if user, ok := plainGrab(body); ok {
					_ = user
					continue
				}
				var req grabRequest
				if err := decodeBody(body, &req, false); err != nil || req.UserID != "u-12345678" {
					b.Fatal(req, err)
				}
			}
		})
	}
}

// BenchmarkDecodeCreate measures the strict decoder on a create body.
func BenchmarkDecodeCreate(b *testing.B) {
	body := []byte(`{"sender_id":"sender-1","total_cents":1000000,"count":1000,"expires_in_seconds":86400}`)
	b.ReportAllocs()
	for b.Loop() {
		var req createRequest
		if err := decodeBody(body, &req, false); err != nil {
			b.Fatal(err)
		}
	}
}
