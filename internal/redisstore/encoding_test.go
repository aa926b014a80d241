package redisstore_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"redpacket/internal/redisstore"
)

// The grab script writes ids and amounts as varints and order numbers two
// digits to a byte (codec.go). Grants of packets whose ids and amounts sit
// at every varint length (one to eight bytes), in an envelope with a large
// id, under odd and even order-number widths, read back as granted: in the
// answer, in the user's claim (a repeat) and in the flusher's queue.
func TestGrantsEncodeEveryVarintLengthAndWidth(t *testing.T) {
	t.Parallel()
	// Grants take packets from the end: the first, 5, is never granted at
	// widths of 7 digits and more, and only the last two are at width 1.
	ids := []int64{5, 1 << 7, 1<<14 - 1, 1 << 14, 1<<21 - 1, 1 << 21, 1<<28 - 1, 1 << 28, 1<<35 - 1, 1 << 35, 1 << 42,
		1<<49 + 3}
	amounts := []int64{1, 1, 127, 128, 16383, 16384, 2_097_152, 3, 5, 7, 9, 11}
	for _, width := range []int{1, 7, 9, 10, 18} {
		s, _, _ := ordersStore(t, width, 1000, time.UTC)
		ctx := t.Context()
		now := time.Date(2030, 5, 17, 12, 0, 0, 0, time.UTC)
		envelope := int64(1<<36 + 3) // shard 3 of 4
		ps := make([]redisstore.Packet, len(ids))
		var total int64
		for i := range ids {
			ps[i] = redisstore.Packet{ID: ids[i], AmountCents: amounts[i]}
			total += amounts[i]
		}
		if loaded, err := s.LoadEnvelope(ctx, envelope, now.Add(time.Hour), total, ps); err != nil || !loaded {
			t.Fatalf("width %d: LoadEnvelope = %v, %v", width, loaded, err)
		}
		granted := map[int64]redisstore.Claim{}
		grants := len(ids) - 1
		if width == 1 {
			grants = 2 // shard 3 of 4 has the sequences 4 and 8 only
		}
		for u := range grants {
			user := "user-" + strconv.Itoa(u)
			c, err := s.Grab(ctx, envelope, user, now)
			if err != nil {
				t.Fatalf("width %d, grant %d: %v", width, u, err)
			}
			if want := int64(4*u + 4); splitOrder(t, c.OrderNo, "20300517", width) != want {
				t.Fatalf("width %d, grant %d: order number %s, want sequence %d", width, u, c.OrderNo, want)
			}
			if i := slices.Index(ids, c.PacketID); i < 0 || amounts[i] != c.AmountCents {
				t.Fatalf("width %d, grant %d: packet %d of %d cents is not one loaded", width, u, c.PacketID, c.AmountCents)
			}
			again, err := s.Grab(ctx, envelope, user, now)
			c.Repeat = true
			if err != nil || again != c {
				t.Fatalf("width %d: repeat of %s = %+v, %v; want %+v", width, user, again, err, c)
			}
			granted[c.PacketID] = c
		}
		b, err := s.TakeBatch(ctx, 3, 100)
		if err != nil || len(b.Claims) != grants {
			t.Fatalf("width %d: TakeBatch = %d claims, %v; want %d", width, len(b.Claims), err, grants)
		}
		for _, q := range b.Claims {
			c, ok := granted[q.PacketID]
			if !ok || q.EnvelopeID != envelope || q.AmountCents != c.AmountCents || q.OrderNo != c.OrderNo ||
				q.UserID == "" || !q.GrabbedAt.Equal(now) {
				t.Errorf("width %d: queued %+v does not match its grant %+v", width, q, c)
			}
		}
	}
}
