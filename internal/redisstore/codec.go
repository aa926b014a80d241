package redisstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Claims and queue entries are written compactly (grab.lua, Reload): a
// granted grab waits in Redis as its claim in a bucket and its entry in the
// shard's queue, and every byte of each is paid once per waiting grab.
//
//	claim:  0x01 varint(packet) varint(amount) varint(grabbed_ms) bcd(order_no)
//	queued: 0x01 varint(envelope) varint(packet) varint(amount) varint(grabbed_ms) bcd(order_no) user
//
// varint is unsigned LEB128 (encoding/binary's Uvarint); bcd is the order
// number's digits two to a byte, high nibble first, ended by a 0xF nibble
// (a whole 0xFF byte after an even number of digits), so it needs no
// length. The first byte, 0x01, tells them from the text of earlier
// versions ("<packet>:<amount>:<grabbed_ms>:<order_no>" and
// "<envelope>:<packet>:...:<user>", always starting with a digit), which
// are still read: claims and queue entries written before an upgrade.
const codecVersion = 0x01

var errCodec = errors.New("malformed compact claim")

// appendClaim appends c's compact form.
func appendClaim(b []byte, c Claim) []byte {
	b = append(b, codecVersion)
	return appendClaimBody(b, c)
}

func appendClaimBody(b []byte, c Claim) []byte {
	b = binary.AppendUvarint(b, uint64(c.PacketID))
	b = binary.AppendUvarint(b, uint64(c.AmountCents))
	b = binary.AppendUvarint(b, uint64(c.GrabbedAt.UnixMilli()))
	return appendBCD(b, c.OrderNo)
}

// appendQueued appends q's compact form.
func appendQueued(b []byte, q QueuedClaim) []byte {
	b = append(b, codecVersion)
	b = binary.AppendUvarint(b, uint64(q.EnvelopeID))
	b = appendClaimBody(b, Claim{PacketID: q.PacketID, AmountCents: q.AmountCents, GrabbedAt: q.GrabbedAt, OrderNo: q.OrderNo})
	return append(b, q.UserID...)
}

func appendBCD(b []byte, digits string) []byte {
	for i := 0; i < len(digits); i += 2 {
		lo := byte(0xF)
		if i+1 < len(digits) {
			lo = digits[i+1] - '0'
		}
		b = append(b, (digits[i]-'0')<<4|lo)
	}
	if len(digits)%2 == 0 {
		b = append(b, 0xFF)
	}
	return b
}

// decodeClaimBody reads a compact claim without its version byte and
// returns what follows it.
func decodeClaimBody(s string) (Claim, string, error) {
	var f [3]int64
	for i := range f {
		v, n := binary.Uvarint([]byte(s[:min(len(s), binary.MaxVarintLen64)]))
		if n <= 0 || v > maxExact || (v < 1 && i < 2) {
			return Claim{}, "", errCodec
		}
		f[i], s = int64(v), s[n:]
	}
	order, rest, err := decodeBCD(s)
	if err != nil {
		return Claim{}, "", err
	}
	return Claim{PacketID: f[0], AmountCents: f[1], GrabbedAt: time.UnixMilli(f[2]).UTC(), OrderNo: order}, rest, nil
}

func decodeBCD(s string) (string, string, error) {
	var d strings.Builder
	for i := 0; i < len(s); i++ {
		hi, lo := s[i]>>4, s[i]&0xF
		switch {
		case hi == 0xF && lo == 0xF && d.Len()%2 == 0:
			return d.String(), s[i+1:], nil
		case hi > 9:
			return "", "", errCodec
		case lo == 0xF:
			d.WriteByte('0' + hi)
			return d.String(), s[i+1:], nil
		case lo > 9:
			return "", "", errCodec
		}
		d.WriteByte('0' + hi)
		d.WriteByte('0' + lo)
	}
	return "", "", errCodec
}

// compactEnvelope reads the envelope of a compact queue entry and how many
// bytes (version byte included) it took; 0, 0 when it is not one.
func compactEnvelope(raw string) (int64, int) {
	v, n := binary.Uvarint([]byte(raw[1:min(len(raw), 1+binary.MaxVarintLen64)]))
	if n <= 0 || v < 1 || v > maxExact {
		return 0, 0
	}
	return int64(v), 1 + n
}

// queuedEnvelope is the envelope of a queue entry, compact or text, or 0
// when it has none (an entry an operator finds malformed).
func queuedEnvelope(raw string) int64 {
	if isCompact(raw) {
		id, _ := compactEnvelope(raw)
		return id
	}
	head, _, ok := strings.Cut(raw, ":")
	v, err := strconv.ParseInt(head, 10, 64)
	if !ok || err != nil {
		return 0
	}
	return v
}

// isCompact tells a compact claim or queue entry from the text of earlier
// versions.
func isCompact(raw string) bool { return raw != "" && raw[0] == codecVersion }

// renderQueued is a queue entry as text, for logs and operators: the compact
// form decoded, or the entry itself (quoted) when it is not one.
func renderQueued(raw string) string {
	if !isCompact(raw) {
		return raw
	}
	q, err := ParseQueued(raw)
	if err != nil {
		return strconv.Quote(raw)
	}
	return fmt.Sprintf("%d:%d:%d:%d:%s:%s", q.EnvelopeID, q.PacketID, q.AmountCents, q.GrabbedAt.UnixMilli(), q.OrderNo, q.UserID)
}
