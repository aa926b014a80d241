package grab

import "sync"

// finishedMax bounds the envelopes a process remembers as finished: enough
// for every envelope hot at once, a few tens of kilobytes.
const finishedMax = 4096

// finishedEnvelopes remembers envelopes whose grabs this process has seen
// answered sold out or expired (closed, failed), so that a limited grab of
// one is first sent without a reservation of the user's limits (see
// grabLimited): on a hot envelope most grabs come after its last packet,
// and each would otherwise reserve and give back, two more round trips to
// Redis, for an answer that takes nothing. It is a hint, never a decision:
// the grab script refuses an unreserved grab that would take a packet, and
// the grab then goes the reserved way. The oldest entry is forgotten first.
type finishedEnvelopes struct {
	mu   sync.Mutex
	set  map[int64]struct{}
	ring []int64 // ids in the order they were added, for forgetting
	next int     // the ring's slot to write next
}

func newFinishedEnvelopes() *finishedEnvelopes {
	return &finishedEnvelopes{set: make(map[int64]struct{}), ring: make([]int64, 0, finishedMax)}
}

func (f *finishedEnvelopes) has(id int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.set[id]
	return ok
}

func (f *finishedEnvelopes) add(id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.set[id]; ok {
		return
	}
	if len(f.ring) < finishedMax {
		f.ring = append(f.ring, id)
	} else {
		// An id forgotten and added again may sit in two slots; the older
		// one forgets it early, which only costs a reservation.
		delete(f.set, f.ring[f.next])
		f.ring[f.next] = id
		f.next = (f.next + 1) % finishedMax
	}
	f.set[id] = struct{}{}
}

func (f *finishedEnvelopes) forget(id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.set, id)
}
