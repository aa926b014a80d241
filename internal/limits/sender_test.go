package limits

import (
	"errors"
	"testing"
	"time"
)

// A create's reservation gives back what it counted, once: releasing it
// again, or releasing one whose reserve never ran, gives back nothing that
// other creates of the day hold.
func TestReleaseCentsGivesBackItsOwnOnce(t *testing.T) {
	t.Parallel()
	l, _, _ := newLimiter(t, Config{SenderDailyCents: 1000})
	ctx, now := t.Context(), time.Now()
	first, err := l.ReserveCents(ctx, "", "alice", 600, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReserveCents(ctx, "", "alice", 300, now); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := l.ReleaseCents(ctx, first); err != nil {
			t.Fatal(err)
		}
	}
	// A reservation whose reserve did not run (its keys, another token).
	unrun := CentsReservation{keys: []string{first.keys[0], first.keys[1] + "-unrun"}}
	if err := l.ReleaseCents(ctx, unrun); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReserveCents(ctx, "", "alice", 700, now); err != nil {
		t.Errorf("300 held + 700 of 1000: %v, want the 600 given back", err)
	}
	if _, err := l.ReserveCents(ctx, "", "alice", 1, now); !errors.Is(err, ErrExceeded) {
		t.Errorf("1000 held + 1 of 1000: %v, want limit exceeded (given back twice?)", err)
	}
}
