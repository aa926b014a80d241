package apikey

import (
	"hash/crc32"
	"regexp"
	"strings"
	"testing"
)

// A key is recognisable (rpk_ and 48 base64url characters, what a secret
// scanner's pattern matches), random, and carries a checksum that a typo or
// a made-up key fails.
func TestKeyShape(t *testing.T) {
	pattern := regexp.MustCompile(`^rpk_[A-Za-z0-9_-]{48}$`)
	seen := map[string]bool{}
	for range 1000 {
		k, err := newKey()
		if err != nil {
			t.Fatal(err)
		}
		if !pattern.MatchString(k) || !wellFormed(k) {
			t.Fatalf("key %q: not of the documented shape or fails its own checksum", k)
		}
		if seen[k] {
			t.Fatalf("key %q made twice", k)
		}
		seen[k] = true
	}
	k, _ := newKey()
	for i := len(Prefix); i < len(k); i++ {
		for _, c := range []byte{'A', 'z', '0', '-', '_'} {
			if k[i] == c {
				continue
			}
			typo := k[:i] + string(c) + k[i+1:]
			if wellFormed(typo) {
				t.Fatalf("%q (one character changed at %d) passes the checksum", typo, i)
			}
		}
	}
	for _, bad := range []string{"", Prefix, strings.Replace(k, Prefix, "rpx_", 1), k + "A", k[:len(k)-1],
		strings.Replace(k, k[10:11], "=", 1), strings.ToUpper(k)} {
		if wellFormed(bad) {
			t.Errorf("%q is taken as a key", bad)
		}
	}
}

func TestChecksumIsCRC32(t *testing.T) {
	for _, p := range [][]byte{nil, []byte("a"), []byte("123456789"), make([]byte, 32)} {
		if got, want := checksum(p), crc32.ChecksumIEEE(p); got != want {
			t.Errorf("checksum(%q) = %08x, want %08x", p, got, want)
		}
	}
}

func TestScopes(t *testing.T) {
	s, err := ParseScopes(" grab,read ,grab")
	if err != nil || !s.Has(ScopeGrab) || !s.Has(ScopeRead) || s.Has(ScopeCreate) || s.Has(ScopeEvents) {
		t.Fatalf("grab,read: %v %v", s, err)
	}
	if got := s.String(); got != "grab,read" {
		t.Errorf("String() = %q, want grab,read", got)
	}
	all, err := ParseScopes("events,read,grab,create")
	if err != nil || all.String() != "create,grab,read,events" {
		t.Errorf("every scope: %q %v", all, err)
	}
	for _, bad := range []string{"", " , ", "grab,delete", "Grab", "grab;read"} {
		if _, err := ParseScopes(bad); err == nil {
			t.Errorf("ParseScopes(%q) accepted", bad)
		}
	}
}

// Checking a key allocates nothing, found or not.
func TestLookupAllocatesNothing(t *testing.T) {
	k := &Keyring{}
	key, _ := newKey()
	k.keys.Store(newKeyset(map[Hash]*entry{hashOf(key): {Key: Key{Name: "a", Scopes: Scopes(ScopeGrab)}}}))
	other, _ := newKey()
	for _, tok := range []string{key, other, "rpk_short", "not a key at all"} {
		if n := testing.AllocsPerRun(100, func() { k.Lookup(tok) }); n != 0 {
			t.Errorf("Lookup(%q) allocates %v times", tok[:8], n)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	k := &Keyring{}
	key, _ := newKey()
	k.keys.Store(newKeyset(map[Hash]*entry{hashOf(key): {Key: Key{Name: "a", Scopes: Scopes(ScopeGrab)}}}))
	unknown, _ := newKey()
	b.Run("active", func(b *testing.B) {
		for b.Loop() {
			k.Lookup(key)
		}
	})
	b.Run("unknown", func(b *testing.B) {
		for b.Loop() {
			k.Lookup(unknown)
		}
	})
	b.Run("malformed", func(b *testing.B) {
		for b.Loop() {
			k.Lookup("rpk_not-a-key")
		}
	})
}
