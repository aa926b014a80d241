package redisstore

import (
	"slices"
	"testing"
)

// TestScriptsDeclareTheGoCodes ties every script to its Go declaration:
// the reply codes each .lua file declares are exactly the Go constants of
// scripts.go (names and values), every quoted word is a Redis command or one
// of the Go constants (meta statuses, field names), and every meta status
// constant is used by some script.
func TestScriptsDeclareTheGoCodes(t *testing.T) {
	t.Parallel()
	var words []string
	for _, s := range scripts {
		var extra = grabOutcomes
		if s != grabScript {
			extra = nil
		}
		for _, err := range s.Check(ScriptWords(), extra...) {
			t.Error(err)
		}
		words = append(words, s.Words()...)
	}
	for _, st := range metaStatuses {
		if !slices.Contains(words, string(st)) {
			t.Errorf("meta status %q is used by no script", st)
		}
	}
}
