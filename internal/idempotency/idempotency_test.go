package idempotency

import (
	"errors"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", MaxKeyLen)
	for _, tc := range []struct {
		values  []string
		key     string
		present bool
		ok      bool
	}{
		{nil, "", false, true},
		{[]string{"order-42"}, "order-42", true, true},
		{[]string{"!~"}, "!~", true, true},
		{[]string{long}, long, true, true},
		{[]string{long + "k"}, "", true, false},
		{[]string{""}, "", true, false},
		{[]string{"has space"}, "", true, false},
		{[]string{"tab\tkey"}, "", true, false},
		{[]string{"caf\u00e9"}, "", true, false},
		{[]string{"del\x7f"}, "", true, false},
		{[]string{"a", "a"}, "", true, false},
	} {
		key, present, err := ParseKey(tc.values)
		if key != tc.key || present != tc.present || (err == nil) != tc.ok {
			t.Errorf("ParseKey(%q) = %q, %v, %v; want %q, %v, ok=%v", tc.values, key, present, err, tc.key, tc.present, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParseKey(%q): %v is not ErrInvalidKey", tc.values, err)
		}
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	a, b := Fingerprint([]byte(`{"a":1}`)), Fingerprint([]byte(`{"a": 1}`))
	if len(a) != 32 || string(a) == string(b) {
		t.Errorf("fingerprints %x and %x: want 32 bytes each, different for different bodies", a, b)
	}
	if string(a) != string(Fingerprint([]byte(`{"a":1}`))) {
		t.Error("one body, two fingerprints")
	}
}
