// Package apikey is access by per-client API keys (GRABBER_AUTH=keys): the
// scopes a key grants, the keys themselves (made, stored only as a hash,
// listed and revoked by the operator commands), and the Keyring each
// grabber checks keys against without asking PostgreSQL per request.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"

	"redpacket/internal/envelope"
)

// Scope is one thing a key may be allowed to do.
type Scope uint8

// The scopes. Every /v1/ route of the API names the one it needs.
const (
	ScopeCreate Scope = 1 << iota // create envelopes (and close them)
	ScopeGrab                     // grab packets, short user ids
	ScopeRead                     // read envelopes: status
	ScopeEvents                   // read the events feed
)

// AllScopes are the scopes in the order they are listed.
var AllScopes = []Scope{ScopeCreate, ScopeGrab, ScopeRead, ScopeEvents}

// String is the scope's name as the API, the commands and PostgreSQL write it.
func (s Scope) String() string {
	switch s {
	case ScopeCreate:
		return "create"
	case ScopeGrab:
		return "grab"
	case ScopeRead:
		return "read"
	case ScopeEvents:
		return "events"
	}
	return fmt.Sprintf("Scope(%d)", uint8(s))
}

// Scopes is a set of scopes.
type Scopes uint8

// Has reports whether s holds scope.
func (s Scopes) Has(scope Scope) bool { return s&Scopes(scope) != 0 }

// Names lists the scopes of s by name, in the order of AllScopes.
func (s Scopes) Names() []string {
	var out []string
	for _, sc := range AllScopes {
		if s.Has(sc) {
			out = append(out, sc.String())
		}
	}
	return out
}

// String is s as the commands take it: "create,grab".
func (s Scopes) String() string { return strings.Join(s.Names(), ",") }

// ScopesOf returns the set of the scopes named in names.
func ScopesOf(names []string) (Scopes, error) {
	var s Scopes
	for _, n := range names {
		sc, ok := scopeByName(n)
		if !ok {
			return 0, fmt.Errorf("unknown scope %q; the scopes are %s", n, Scopes(0xff).String())
		}
		s |= Scopes(sc)
	}
	return s, nil
}

// ParseScopes reads a comma-separated list of scope names, at least one.
func ParseScopes(list string) (Scopes, error) {
	var names []string
	for n := range strings.SplitSeq(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return 0, fmt.Errorf("no scope given; the scopes are %s", Scopes(0xff).String())
	}
	return ScopesOf(names)
}

func scopeByName(name string) (Scope, bool) {
	for _, sc := range AllScopes {
		if sc.String() == name {
			return sc, true
		}
	}
	return 0, false
}

// A key is Prefix and the unpadded base64url of 32 random bytes followed by
// their CRC-32 (IEEE, big-endian): 52 characters. The prefix lets secret
// scanners (and people) recognise a leaked key; the checksum lets them, and
// the grabber, tell a key from a random string of the same shape without
// asking anyone.
const (
	Prefix    = "rpk_"
	secretLen = 32
	keyLen    = len(Prefix) + (secretLen+4)*4/3
)

// keyEncoding is unpadded base64url that refuses stray bits in the last
// character: one key has one spelling.
var keyEncoding = base64.RawURLEncoding.Strict()

// ErrMalformed is a name or scope list a key cannot have.
var ErrMalformed = errors.New("malformed")

// newKey returns a new random key.
func newKey() (string, error) {
	var raw [secretLen + 4]byte
	if _, err := rand.Read(raw[:secretLen]); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	binary.BigEndian.PutUint32(raw[secretLen:], checksum(raw[:secretLen]))
	return Prefix + keyEncoding.EncodeToString(raw[:]), nil
}

// wellFormed reports whether token has a key's shape and checksum.
func wellFormed(token string) bool {
	if len(token) != keyLen || !strings.HasPrefix(token, Prefix) {
		return false
	}
	var enc [keyLen - len(Prefix)]byte // a copy on the stack: a conversion of 48 bytes would allocate
	copy(enc[:], token[len(Prefix):])
	var raw [secretLen + 4]byte
	n, err := keyEncoding.Decode(raw[:], enc[:])
	return err == nil && n == len(raw) &&
		binary.BigEndian.Uint32(raw[secretLen:]) == checksum(raw[:secretLen])
}

// checksum is crc32.ChecksumIEEE(p), computed here so that p stays on the
// stack (the package's own calls through a function value, which makes its
// argument escape: an allocation per check).
func checksum(p []byte) uint32 {
	crc := ^uint32(0)
	for _, b := range p {
		crc = crc32.IEEETable[byte(crc)^b] ^ crc>>8
	}
	return ^crc
}

// Hash is what is stored of a key: the SHA-256 of its text. A key holds 256
// random bits, so no amount of guessing finds one from its hash, however
// fast the hash: a slow password hash such as bcrypt protects guessable
// secrets only, and would cost every request milliseconds (or a cache of
// keys in the clear) and, being salted, rule out finding a key by its hash.
// An operator finds the owner of a leaked key with
// SELECT name FROM api_keys WHERE key_hash = sha256('rpk_...'::bytea).
type Hash [sha256.Size]byte

// hashOf hashes a key of keyLen characters without allocating.
func hashOf(key string) Hash {
	var buf [keyLen]byte
	copy(buf[:], key)
	return sha256.Sum256(buf[:len(key)])
}

// checkName checks a key's name: 1 to 64 characters of [A-Za-z0-9_.:@-],
// as user ids (and the table's check).
func checkName(name string) error {
	if envelope.ValidateUserID("name", name) != nil {
		return fmt.Errorf("%w name %q: must be 1 to 64 characters of A-Z a-z 0-9 _ . : @ -", ErrMalformed, name)
	}
	return nil
}

// ErrInsufficientScope refuses a request whose key lacks the route's scope.
var ErrInsufficientScope = errors.New("insufficient scope")
