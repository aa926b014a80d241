package envelope_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"redpacket/internal/envelope"
)

func TestCommitment(t *testing.T) {
	t.Parallel()
	ids, amounts := envelope.HandOutOrder(100, []int64{5, 7, 9})
	if ids[0] != 102 || ids[2] != 100 || amounts[0] != 9 || amounts[2] != 5 {
		t.Fatalf("HandOutOrder = %v %v, want the highest id first", ids, amounts)
	}
	if got, want := string(envelope.CommitmentInput("ab", ids, amounts)), "ab:102:9,101:7,100:5"; got != want {
		t.Fatalf("input %q, want %q", got, want)
	}
	sum := sha256.Sum256([]byte("ab:102:9,101:7,100:5"))
	if got := envelope.Commitment("ab", ids, amounts); got != hex.EncodeToString(sum[:]) {
		t.Errorf("commitment %s", got)
	}
	a, b := envelope.CommitSplit(ids, amounts), envelope.CommitSplit(ids, amounts)
	if len(a.Salt) != 64 || a.Salt == b.Salt || a.Commitment == b.Commitment {
		t.Errorf("two commitments of one split share a salt or commitment: %+v %+v", a, b)
	}
	if a.Commitment != envelope.Commitment(a.Salt, ids, amounts) {
		t.Error("CommitSplit's commitment does not verify")
	}
}
