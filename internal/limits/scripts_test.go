package limits

import "testing"

// TestScriptsDeclareTheGoCodes ties every script to its Go declaration: the
// reply codes each .lua file declares are exactly the Go constants here,
// and it quotes no word but Redis's and the bucket's fields.
func TestScriptsDeclareTheGoCodes(t *testing.T) {
	t.Parallel()
	for _, s := range scripts {
		for _, err := range s.Check([]string{fieldTokens, fieldMs}) {
			t.Error(err)
		}
	}
}
