package envelope

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func ptr(v int64) *int64 { return &v }

// validateLimits are the limits the validation cases are written for.
var validateLimits = DefaultLimits()

// validRequest is a request that passes validation.
var validRequest = CreateRequest{SenderID: "alice", TotalCents: 10000, Count: 10}

// validWith is validRequest changed by edit.
func validWith(edit func(*CreateRequest)) CreateRequest {
	r := validRequest
	edit(&r)
	return r
}

// validateCases: each request with the field its first violation names, or
// with "" and the expiry it is given.
var validateCases = []struct {
	name  string
	req   CreateRequest
	field string        // "" means valid
	want  time.Duration // effective expiry when valid
}{
	{"valid, default expiry", validRequest, "", DefaultExpiresIn},

	// sender_id
	{"empty sender", validWith(func(r *CreateRequest) { r.SenderID = "" }), "sender_id", 0},
	{"1-char sender", validWith(func(r *CreateRequest) { r.SenderID = "a" }), "", DefaultExpiresIn},
	{"64-char sender", validWith(func(r *CreateRequest) { r.SenderID = strings.Repeat("a", 64) }), "", DefaultExpiresIn},
	{"65-char sender", validWith(func(r *CreateRequest) { r.SenderID = strings.Repeat("a", 65) }), "sender_id", 0},
	{"non-ASCII sender", validWith(func(r *CreateRequest) { r.SenderID = "小明" }), "sender_id", 0},
	{"space in sender", validWith(func(r *CreateRequest) { r.SenderID = "a b" }), "sender_id", 0},
	{"all classes sender", validWith(func(r *CreateRequest) { r.SenderID = "Az09_.:@-" }), "", DefaultExpiresIn},

	// total_cents
	{"total 0", validWith(func(r *CreateRequest) { r.TotalCents, r.Count = 0, 1 }), "total_cents", 0},
	{"total negative", validWith(func(r *CreateRequest) { r.TotalCents, r.Count = -1, 1 }), "total_cents", 0},
	{"total 1", validWith(func(r *CreateRequest) { r.TotalCents, r.Count = 1, 1 }), "", DefaultExpiresIn},
	{"total max", validWith(func(r *CreateRequest) {
		r.TotalCents, r.Count = validateLimits.MaxTotalCents, validateLimits.MaxTotalCents/validateLimits.MaxPacketCents
	}), "", DefaultExpiresIn},
	{"total max+1", validWith(func(r *CreateRequest) { r.TotalCents = validateLimits.MaxTotalCents + 1 }), "total_cents", 0},
	{"total == count", validWith(func(r *CreateRequest) { r.TotalCents, r.Count = 10, 10 }), "", DefaultExpiresIn},
	{"total == count-1", validWith(func(r *CreateRequest) { r.TotalCents, r.Count = 9, 10 }), "total_cents", 0},

	// count
	{"count 0", validWith(func(r *CreateRequest) { r.Count = 0 }), "count", 0},
	{"count negative", validWith(func(r *CreateRequest) { r.Count = -3 }), "count", 0},
	{"count 1", validWith(func(r *CreateRequest) { r.Count = 1 }), "", DefaultExpiresIn},
	{"count max", validWith(func(r *CreateRequest) {
		r.TotalCents, r.Count = validateLimits.MaxTotalCents, int64(validateLimits.MaxPackets)
	}), "", DefaultExpiresIn},
	{"count max+1", validWith(func(r *CreateRequest) {
		r.TotalCents, r.Count = validateLimits.MaxTotalCents, int64(validateLimits.MaxPackets)+1
	}), "count", 0},
	{"count 0, total 0", validWith(func(r *CreateRequest) { r.TotalCents, r.Count = 0, 0 }), "total_cents", 0},

	// expires_in_seconds
	{"expiry 0", validWith(func(r *CreateRequest) { r.ExpiresInSeconds = ptr(0) }), "expires_in_seconds", 0},
	{"expiry negative", validWith(func(r *CreateRequest) { r.ExpiresInSeconds = ptr(-1) }), "expires_in_seconds", 0},
	{"expiry 1", validWith(func(r *CreateRequest) { r.ExpiresInSeconds = ptr(1) }), "", time.Second},
	{"expiry 86400", validWith(func(r *CreateRequest) { r.ExpiresInSeconds = ptr(86400) }), "", 86400 * time.Second},
	{"expiry max", validWith(func(r *CreateRequest) { r.ExpiresInSeconds = ptr(604800) }), "", MaxExpiresIn},
	{"expiry max+1", validWith(func(r *CreateRequest) { r.ExpiresInSeconds = ptr(604801) }), "expires_in_seconds", 0},
	{"expiry huge", validWith(func(r *CreateRequest) { r.ExpiresInSeconds = ptr(1 << 62) }), "expires_in_seconds", 0},

	// first violation wins, in the documented order
	{"sender before total", CreateRequest{SenderID: "", TotalCents: 0, Count: 0, ExpiresInSeconds: ptr(0)}, "sender_id", 0},
	{"count before expiry", validWith(func(r *CreateRequest) { r.Count, r.ExpiresInSeconds = 0, ptr(0) }), "count", 0},
	{"cross rule before expiry", validWith(func(r *CreateRequest) { r.TotalCents, r.ExpiresInSeconds = 5, ptr(0) }), "total_cents", 0},
}

func TestValidate(t *testing.T) {
	lim := validateLimits
	for _, c := range validateCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := lim.Validate(c.req)
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want valid", c.req, err)
				}
				if got != c.want {
					t.Fatalf("Validate(%+v) expiry = %v, want %v", c.req, got, c.want)
				}
				return
			}
			checkFieldError(t, err, c.field)
			if got != 0 {
				t.Errorf("expiry = %v on error, want 0", got)
			}
		})
	}
}

// checkFieldError asserts err is a *FieldError for field that wraps
// ErrInvalid and renders as "field: problem".
func checkFieldError(t *testing.T, err error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want one for field %q", field)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("error %v does not wrap ErrInvalid", err)
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %T %v is not a *FieldError", err, err)
	}
	if fe.Field != field {
		t.Errorf("error names field %q, want %q (%v)", fe.Field, field, err)
	}
	if fe.Problem == "" || err.Error() != field+": "+fe.Problem {
		t.Errorf("Error() = %q, want %q followed by a problem", err.Error(), field+": ")
	}
}

func TestValidateProblems(t *testing.T) {
	lim := DefaultLimits()
	cases := []struct {
		req  CreateRequest
		want string
	}{
		{CreateRequest{SenderID: "a", TotalCents: 10, Count: 0}, "count: must be between 1 and 100000"},
		{CreateRequest{SenderID: "a", TotalCents: 0, Count: 1}, "total_cents: must be between 1 and 100000000"},
		{CreateRequest{SenderID: "a", TotalCents: 9, Count: 10}, "total_cents: must be at least count (every packet is at least 1 cent)"},
		{CreateRequest{SenderID: "a", TotalCents: 10, Count: 1, ExpiresInSeconds: ptr(0)}, "expires_in_seconds: must be between 1 and 604800"},
		{CreateRequest{SenderID: "", TotalCents: 10, Count: 1}, "sender_id: must be 1 to 64 characters of [A-Za-z0-9_.:@-]"},
	}
	for _, c := range cases {
		if _, err := lim.Validate(c.req); err == nil || err.Error() != c.want {
			t.Errorf("Validate(%+v) = %v, want %q", c.req, err, c.want)
		}
	}
}

func TestValidateCustomLimits(t *testing.T) {
	lim := Limits{MaxPackets: 5, MaxTotalCents: 500, MaxPacketCents: 500}
	if _, err := lim.Validate(CreateRequest{SenderID: "a", TotalCents: 500, Count: 5}); err != nil {
		t.Fatalf("at the limits: %v", err)
	}
	_, err := lim.Validate(CreateRequest{SenderID: "a", TotalCents: 500, Count: 6})
	checkFieldError(t, err, "count")
	_, err = lim.Validate(CreateRequest{SenderID: "a", TotalCents: 501, Count: 5})
	checkFieldError(t, err, "total_cents")
	// Limits set past what stays exact are held to MaxCents.
	huge := Limits{MaxPackets: 5, MaxTotalCents: 1e17, MaxPacketCents: MaxCents}
	_, err = huge.Validate(CreateRequest{SenderID: "a", TotalCents: MaxCents + 1, Count: 5})
	checkFieldError(t, err, "total_cents")
	if _, err := huge.Validate(CreateRequest{SenderID: "a", TotalCents: MaxCents, Count: 5}); err != nil {
		t.Errorf("total MaxCents: %v", err)
	}
}

func TestDefaultLimits(t *testing.T) {
	if got := DefaultLimits(); got != (Limits{MaxPackets: 100000, MaxTotalCents: 100000000, MaxPacketCents: 20000}) {
		t.Fatalf("DefaultLimits() = %+v", got)
	}
	if DefaultExpiresIn != 86400*time.Second || MaxExpiresIn != 7*24*time.Hour {
		t.Fatalf("DefaultExpiresIn = %v, MaxExpiresIn = %v", DefaultExpiresIn, MaxExpiresIn)
	}
}

func TestValidateUserID(t *testing.T) {
	valid := []string{
		"a", "Z", "0", "_", ".", ":", "@", "-",
		"user_1", "u.s.e.r", "wx:openid", "alice@example.com", "a-b",
		"AZaz09_.:@-",
		strings.Repeat("x", 64),
	}
	for _, id := range valid {
		if err := ValidateUserID("user_id", id); err != nil {
			t.Errorf("ValidateUserID(%q) = %v, want nil", id, err)
		}
	}
	invalid := []string{
		"",
		strings.Repeat("x", 65),
		strings.Repeat("é", 2),
		"小明",
		"abc\u00e9", // non-ASCII letter
		"a\x00b",    // NUL
		"a\xffb",    // invalid UTF-8
		"a b", "a\tb", "a/b", "a+b", "a#b", "a,b", "a;b", "a!b", "a'b", `a"b`, "a\\b",
		"a[b", "a`b", "a{b", "a~b", "a%b", "a=b", "a?b", "a\nb",
	}
	for _, id := range invalid {
		err := ValidateUserID("user_id", id)
		checkFieldError(t, err, "user_id")
	}
	checkFieldError(t, ValidateUserID("sender_id", ""), "sender_id")
}

// TestValidateUserIDAllBytes checks the byte table against the character
// class written out independently.
func TestValidateUserIDAllBytes(t *testing.T) {
	for b := range 256 {
		c := byte(b)
		want := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_.:@-", c) >= 0
		err := ValidateUserID("user_id", "a"+string([]byte{c})+"z")
		if (err == nil) != want {
			t.Errorf("byte %#02x: err = %v, want allowed = %v", c, err, want)
		}
	}
}

func TestValidateUserIDNoAllocs(t *testing.T) {
	id := "wx:o6_bmjrPTlm6_2sgVt7hMZOPfL2M@x.y-z"
	if n := testing.AllocsPerRun(100, func() { _ = ValidateUserID("user_id", id) }); n != 0 {
		t.Fatalf("ValidateUserID allocates %v times per valid id", n)
	}
}

func TestStatusValues(t *testing.T) {
	// These strings are stored in PostgreSQL; changing one breaks old rows.
	want := map[Status]string{
		StatusLoading:   "loading",
		StatusOpen:      "open",
		StatusSoldOut:   "sold_out",
		StatusExpired:   "expired",
		StatusSettled:   "settled",
		StatusSuspended: "suspended",
	}
	for s, v := range want {
		if string(s) != v {
			t.Errorf("status %q, want %q", s, v)
		}
	}
}

func BenchmarkValidateUserID(b *testing.B) {
	id := "wx:o6_bmjrPTlm6_2sgVt7hMZOPfL2M@x.y-z"
	b.ReportAllocs()
	for b.Loop() {
		if err := ValidateUserID("user_id", id); err != nil {
			b.Fatal(err)
		}
	}
}
