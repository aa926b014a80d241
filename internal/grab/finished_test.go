package grab

import "testing"

// The finished envelopes stay within finishedMax, forgetting the oldest
// first, and one forgotten is sent reserved again.
func TestFinishedEnvelopesBounded(t *testing.T) {
	t.Parallel()
	f := newFinishedEnvelopes()
	for id := int64(1); id <= finishedMax+10; id++ {
		f.add(id)
		f.add(id) // once is enough
	}
	if len(f.set) != finishedMax {
		t.Fatalf("remembers %d envelopes, want %d", len(f.set), finishedMax)
	}
	for id := int64(1); id <= 10; id++ {
		if f.has(id) {
			t.Errorf("envelope %d, among the oldest, still remembered", id)
		}
	}
	if !f.has(11) || !f.has(finishedMax+10) {
		t.Error("the newest envelopes forgotten")
	}
	f.forget(11)
	if f.has(11) {
		t.Error("envelope 11 remembered after forget")
	}
	f.add(11)
	if !f.has(11) || len(f.set) != finishedMax {
		t.Errorf("envelope 11 added again: has %v, %d remembered", f.has(11), len(f.set))
	}
}
