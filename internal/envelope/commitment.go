package envelope

import (
	cryptorand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// SplitCommitment binds an envelope to its split before the first grab: the
// create answer carries Commitment, and once the envelope is settled anyone
// can read Salt and the packets and recompute it (docs/api.md shows how).
// The salt stays secret until then, so nobody can test guesses of the split
// against the commitment while it matters.
type SplitCommitment struct {
	Salt       string // 32 random bytes, lowercase hex
	Commitment string // lowercase hex SHA-256 of CommitmentInput
}

// HandOutOrder returns the packets of an envelope whose packet ids are
// firstPacketID, firstPacketID+1, ... (amounts in that order) in the order
// they are handed out: Redis pops the pool from its end, and the pool is
// loaded in id order, so the highest id goes first.
func HandOutOrder(firstPacketID int64, amounts []int64) (ids, ordered []int64) {
	n := len(amounts)
	ids, ordered = make([]int64, n), make([]int64, n)
	for i := range n {
		ids[i] = firstPacketID + int64(n-1-i)
		ordered[i] = amounts[n-1-i]
	}
	return ids, ordered
}

// CommitSplit draws a salt and commits to packets given in hand-out order.
func CommitSplit(ids, amounts []int64) SplitCommitment {
	var b [32]byte
	_, _ = cryptorand.Read(b[:]) // never fails (crypto/rand)
	salt := hex.EncodeToString(b[:])
	return SplitCommitment{Salt: salt, Commitment: Commitment(salt, ids, amounts)}
}

// Commitment is the lowercase hex SHA-256 of CommitmentInput.
func Commitment(salt string, ids, amounts []int64) string {
	sum := sha256.Sum256(CommitmentInput(salt, ids, amounts))
	return hex.EncodeToString(sum[:])
}

// CommitmentInput is what is hashed: salt + ":" + "id1:amount1,id2:amount2,..."
// over the packets in hand-out order.
func CommitmentInput(salt string, ids, amounts []int64) []byte {
	b := make([]byte, 0, len(salt)+1+len(ids)*24)
	b = append(b, salt...)
	b = append(b, ':')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, amounts[i], 10)
	}
	return b
}
