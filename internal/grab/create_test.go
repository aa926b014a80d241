package grab_test

import (
	"testing"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/testenv/stack"
)

// A day's share-code counter that went back (Redis restarted from an older
// file) hands out codes already in use again: creates skip past them
// rather than fail.
func TestCreateSkipsShareCodesHandedOutBefore(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	var last grab.Envelope
	for range 30 {
		e, err := s.Svc.Create(t.Context(), envelope.CreateRequest{SenderID: "s", TotalCents: 100, Count: 1})
		if err != nil {
			t.Fatal(err)
		}
		last = e
	}
	day := s.Redis.Keys().ShareDay(last.ShareCode[:6])
	if err := s.RDB.DecrBy(t.Context(), day, 30).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Svc.Create(t.Context(), envelope.CreateRequest{SenderID: "s", TotalCents: 100, Count: 1}); err != nil {
		t.Fatalf("create after the counter went back 30: %v", err)
	}
	if n, err := s.RDB.Get(t.Context(), day).Int(); err != nil || n < 31 || n > 60 {
		t.Errorf("the day's counter = %d, %v; want past the 30 codes in use, by less than as many again", n, err)
	}
}
