package envelope

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func strp(v string) *string { return &v }

func TestCheckExtras(t *testing.T) {
	t.Parallel()
	lim := DefaultLimits()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	base := func() CreateRequest { return CreateRequest{SenderID: "s", TotalCents: 300, Count: 3} }
	many := make([]string, 1001)
	for i := range many {
		many[i] = "u" + strings.Repeat("x", i%50) + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
	}
	meta21 := map[string]string{}
	for i := range 21 {
		meta21[string(rune('a'+i))] = "v"
	}
	cases := []struct {
		name  string
		edit  func(*CreateRequest)
		field string // "" valid
	}{
		{"defaults", func(*CreateRequest) {}, ""},
		{"fixed", func(r *CreateRequest) { r.Kind = KindFixed }, ""},
		{"fixed not a multiple", func(r *CreateRequest) { r.Kind, r.TotalCents = KindFixed, 301 }, "total_cents"},
		{"unknown kind", func(r *CreateRequest) { r.Kind = "lucky" }, "kind"},
		{"above the packet cap", func(r *CreateRequest) { r.TotalCents = 3*20000 + 1 }, "total_cents"},
		{"at the packet cap", func(r *CreateRequest) { r.TotalCents = 3 * 20000 }, ""},
		{"fixed above the cap", func(r *CreateRequest) { r.Kind, r.TotalCents, r.Count = KindFixed, 20001, 1 }, "total_cents"},
		{"recipients", func(r *CreateRequest) { r.Recipients = []string{"a", "b", "c"} }, ""},
		{"empty recipients", func(r *CreateRequest) { r.Recipients = []string{} }, "recipients"},
		{"fewer recipients than packets", func(r *CreateRequest) { r.Recipients = []string{"a", "b"} }, "count"},
		{"repeated recipient", func(r *CreateRequest) { r.Recipients = []string{"a", "b", "a"} }, "recipients"},
		{"bad recipient", func(r *CreateRequest) { r.Recipients = []string{"a", "b", "c d"} }, "recipients"},
		{"1001 recipients", func(r *CreateRequest) { r.Recipients = many }, "recipients"},
		{"password", func(r *CreateRequest) { r.Password = strp("恭喜发财") }, ""},
		{"32-character password", func(r *CreateRequest) { r.Password = strp(strings.Repeat("密", 32)) }, ""},
		{"empty password", func(r *CreateRequest) { r.Password = strp("") }, "password"},
		{"long password", func(r *CreateRequest) { r.Password = strp(strings.Repeat("a", 33)) }, "password"},
		{"control in password", func(r *CreateRequest) { r.Password = strp("a\nb") }, "password"},
		{"greeting", func(r *CreateRequest) { r.Greeting = strings.Repeat("福", 64) }, ""},
		{"long greeting", func(r *CreateRequest) { r.Greeting = strings.Repeat("福", 65) }, "greeting"},
		{"control in greeting", func(r *CreateRequest) { r.Greeting = "hi\x7f" }, "greeting"},
		{"metadata", func(r *CreateRequest) { r.Metadata = map[string]string{"campaign.id-1_x": strings.Repeat("v", 500)} }, ""},
		{"21 metadata keys", func(r *CreateRequest) { r.Metadata = meta21 }, "metadata"},
		{"bad metadata key", func(r *CreateRequest) { r.Metadata = map[string]string{"a b": "v"} }, "metadata"},
		{"long metadata key", func(r *CreateRequest) { r.Metadata = map[string]string{strings.Repeat("k", 41): "v"} }, "metadata"},
		{"long metadata value", func(r *CreateRequest) { r.Metadata = map[string]string{"k": strings.Repeat("v", 501)} }, "metadata"},
		{"NUL in a metadata value", func(r *CreateRequest) { r.Metadata = map[string]string{"k": "a\x00b"} }, "metadata"},
		{"control characters in a metadata value", func(r *CreateRequest) { r.Metadata = map[string]string{"k": "a\x01\nb"} }, ""},
		{"starts_at", func(r *CreateRequest) { r.StartsAt = "2026-11-28T10:00:00Z" }, ""},
		{"starts_at too far", func(r *CreateRequest) { r.StartsAt = "2026-11-28T10:00:00.001Z" }, "starts_at"},
		{"starts_at not RFC 3339", func(r *CreateRequest) { r.StartsAt = "2026-11-28 10:00:00" }, "starts_at"},
	}
	for _, c := range cases {
		r := base()
		c.edit(&r)
		_, err := lim.Check(r, now)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		checkFieldError(t, err, c.field)
	}
}

func TestCheckStartsAt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	r := CreateRequest{SenderID: "s", TotalCents: 3, Count: 3, StartsAt: "2026-11-21T19:00:00.5+08:00"}
	c, err := DefaultLimits().Check(r, now)
	if err != nil || !c.StartsAt.Equal(now.Add(time.Hour+500*time.Millisecond)) || c.TTL != DefaultExpiresIn {
		t.Fatalf("Check = %+v, %v; want a start an hour and a half second on", c, err)
	}
	r.StartsAt = "2026-11-20T10:00:00Z" // past: starts now
	if c, err := DefaultLimits().Check(r, now); err != nil || !c.StartsAt.Equal(now) {
		t.Fatalf("a past start: %+v, %v; want now", c, err)
	}
}

// No random split has a packet above the cap, also when the total is as
// large as the cap allows; a total above count × cap is refused.
func TestSplitCapped(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		total int64
		count int
		cap   int64
	}{{20000 * 100, 100, 20000}, {20000*100 - 1, 100, 20000}, {150000, 10, 20000}, {5, 5, 1}, {9, 5, 2}, {100000, 100000, 1}} {
		for range 200 {
			amounts, err := SplitCapped(c.total, c.count, c.cap, r)
			if err != nil {
				t.Fatalf("SplitCapped(%d, %d, %d): %v", c.total, c.count, c.cap, err)
			}
			var sum int64
			for _, a := range amounts {
				if a < 1 || a > c.cap {
					t.Fatalf("SplitCapped(%d, %d, %d) gave a packet of %d", c.total, c.count, c.cap, a)
				}
				sum += a
			}
			if sum != c.total || len(amounts) != c.count {
				t.Fatalf("SplitCapped(%d, %d, %d): %d packets summing to %d", c.total, c.count, c.cap, len(amounts), sum)
			}
		}
	}
	if _, err := SplitCapped(20001, 1, 20000, r); err == nil {
		t.Fatal("a total above count × cap was split")
	}
}

func TestFixed(t *testing.T) {
	t.Parallel()
	amounts, err := Fixed(300, 3)
	if err != nil || len(amounts) != 3 || amounts[0] != 100 || amounts[1] != 100 || amounts[2] != 100 {
		t.Fatalf("Fixed(300, 3) = %v, %v", amounts, err)
	}
	if _, err := Fixed(301, 3); err == nil {
		t.Fatal("Fixed(301, 3) split")
	}
}

func TestPasswordDigest(t *testing.T) {
	t.Parallel()
	a, b := PasswordDigest(1, "pw"), PasswordDigest(2, "pw")
	if a == b || len(a) != 64 || a != PasswordDigest(1, "pw") || strings.Contains(a, "pw") {
		t.Fatalf("digests %q, %q", a, b)
	}
}
