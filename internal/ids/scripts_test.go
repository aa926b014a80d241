package ids

import "testing"

// TestScriptsDeclareTheGoCodes ties every script to its Go declaration: the
// reply codes each .lua file declares are exactly the Go constants of
// scripts.go, and it quotes no word but Redis's.
func TestScriptsDeclareTheGoCodes(t *testing.T) {
	t.Parallel()
	for _, s := range scripts {
		for _, err := range s.Check(nil) {
			t.Error(err)
		}
	}
}
