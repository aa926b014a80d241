package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestWriteGrabMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	shanghai := time.FixedZone("UTC+8", 8*3600)
	for _, g := range []grabResponse{
		{EnvelopeID: 1001, PacketID: 7, AmountCents: 123, OrderNo: "202611210000000042",
			GrabbedAt: Timestamp(time.UnixMilli(1_800_000_000_123)), Repeat: false},
		{EnvelopeID: 9007199254740991, PacketID: 1, AmountCents: 1, OrderNo: "",
			GrabbedAt: Timestamp(time.UnixMilli(5).In(shanghai)), Repeat: true},
	} {
		fast, slow := httptest.NewRecorder(), httptest.NewRecorder()
		writeGrab(fast, g)
		writeJSON(slow, 200, g)
		if fast.Body.String() != slow.Body.String() || fast.Code != slow.Code ||
			fast.Header().Get("Content-Type") != slow.Header().Get("Content-Type") {
			t.Errorf("writeGrab = %d %q, encoding/json = %d %q", fast.Code, fast.Body, slow.Code, slow.Body)
		}
		if g.OrderNo == "" && !strings.Contains(fast.Body.String(), `"order_no":null`) {
			t.Errorf("a grab without order number answers %s, want order_no null", fast.Body)
		}
	}
}

// FuzzPlainGrab: whatever body the short way accepts, the strict decoder
// accepts too, with the same user id.
func FuzzPlainGrab(f *testing.F) {
	for _, s := range []string{`{"user_id":"u-1"}`, `{"user_id":""}`, `{"user_id":"a\"b"}`, `{"user_id":"x"} `,
		`{"USER_ID":"x"}`, `{"user_id":"a","user_id":"b"}`, `{"user_id":"é"}`, `{"user_id":"a"}}`, `{"user_id":"a:b@c.d_e"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		user, ok := plainGrab(body)
		if !ok {
			return
		}
		var req grabRequest
		if err := decodeBody(body, &req, false); err != nil || req.UserID != user {
			t.Fatalf("plainGrab(%q) = %q, strict decoder = %q, %v", body, user, req.UserID, err)
		}
	})
}

// FuzzAppendTimestamp: the grab's timestamp writer writes what
// AppendFormat writes with the API's layout, in UTC, for any instant.
func FuzzAppendTimestamp(f *testing.F) {
	for _, ms := range []int64{0, 1, 999, 1_800_000_000_123, -1, -62135596800000, 253402300799999, 253402300800000} {
		f.Add(ms, int64(0))
	}
	f.Add(int64(1_800_000_000_000), int64(999_999))
	f.Fuzz(func(t *testing.T, ms, ns int64) {
		tm := time.UnixMilli(ms).Add(time.Duration(ns % 1_000_000)).In(time.FixedZone("x", 5*3600+1800))
		want := string(tm.UTC().AppendFormat(nil, timestampLayout))
		if got := string(appendTimestamp(nil, tm)); got != want {
			t.Fatalf("appendTimestamp(%v) = %q, AppendFormat %q", tm, got, want)
		}
	})
}

func BenchmarkWriteGrab(b *testing.B) {
	g := grabResponse{EnvelopeID: 1001, PacketID: 123456, AmountCents: 1999, OrderNo: "202611230000012345",
		GrabbedAt: Timestamp(time.UnixMilli(1_800_000_000_123)), Repeat: false}
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		w.Body.Reset()
		writeGrab(w, g)
	}
}

// BenchmarkAppendTimestamp compares the grab's timestamp writer with
// AppendFormat, its reference.
func BenchmarkAppendTimestamp(b *testing.B) {
	tm := time.UnixMilli(1_800_000_000_123)
	buf := make([]byte, 0, 64)
	b.Run("appendTimestamp", func(b *testing.B) {
		for b.Loop() {
			buf = appendTimestamp(buf[:0], tm)
		}
	})
	b.Run("AppendFormat", func(b *testing.B) {
		for b.Loop() {
			buf = tm.UTC().AppendFormat(buf[:0], timestampLayout)
		}
	})
}
