package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	rs "redpacket/internal/redisscript"
	"redpacket/internal/testenv"
)

// TestBatchedGrabsMatchOneByOne is the grab script's promise: a call that
// decides many grabs answers each exactly as one call per grab would, in
// order, numbers the grants alike, and leaves Redis in the same state.
// Random sequences mix envelopes of one shard, repeats, a user's second try
// within the call, clocks on either side of the expiry, sold-out pools,
// suspended, closed and missing envelopes, one whose meta fails the checks,
// one with a start, recipients and a password (grabs carrying the right,
// a wrong or no password), grabs without a reservation, and order numbers that run out at a random
// ceiling.
func TestBatchedGrabsMatchOneByOne(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	expires := time.UnixMilli(1_800_000_000_000)
	seen := map[int64]bool{}
	t.Cleanup(func() {
		for _, c := range []rs.Code{grabNotStarted, grabNotRecipient, grabWrongPassword, grabUnreserved} {
			if !seen[int64(c)] {
				t.Errorf("no grab was answered %d: the gates were not exercised", c)
			}
		}
	})
	for round := range 60 {
		rng := rand.New(rand.NewPCG(uint64(round), 7))
		one := New(rdb, fmt.Sprintf("%s-one%d", prefix, round), 4)
		many := New(rdb, fmt.Sprintf("%s-many%d", prefix, round), 4)
		envs := []int64{5, 9, 13, 17} // all in shard 1
		seed, step := rng.Uint64(), 5+rng.Int64N(60)
		for _, s := range []*Store{one, many} {
			setUpEnvelopes(t, s, envs, expires, seed, step)
		}
		calls := randomGrabs(one, envs, expires, rng)
		var want []any
		for _, g := range calls {
			want = append(want, runGrabs(t, one, []grabCall{g})...)
		}
		got := runGrabs(t, many, rebuild(many, calls))
		for i := 0; i < len(got); i += 2 {
			if c, ok := got[i].(int64); ok {
				seen[c] = true
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: batched replies\n%v\nwant one by one\n%v", round, got, want)
		}
		if a, b := dumpState(t, one, envs), dumpState(t, many, envs); !reflect.DeepEqual(a, b) {
			t.Fatalf("round %d: state after batched grabs\n%v\nwant\n%v", round, b, a)
		}
	}
}

// setUpEnvelopes loads the envelopes with few packets each (so pools run
// out), then makes the third suspended and the fourth closed; envelope 21
// of the same shard is never loaded, and 25's meta holds a total beyond
// exact integers. The shard gets step order numbers. seed picks the same
// packets for both stores.
func setUpEnvelopes(t *testing.T, s *Store, envs []int64, expires time.Time, seed uint64, step int64) {
	t.Helper()
	ctx := context.Background()
	numbers := newMemNumbering(s, 10, step, time.UTC)
	if err := numbers.Supply(ctx, &OrderShortage{Shard: 1, Date: numbers.Date(expires)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadEnvelope(ctx, 25, expires, 10, []Packet{{ID: 2500, AmountCents: 10}}); err != nil {
		t.Fatal(err)
	}
	s.rdb.HSet(ctx, s.keys.Meta(25), fieldTotal, "1e17")
	rng := rand.New(rand.NewPCG(seed, 1))
	for i, id := range envs {
		packets := make([]Packet, 1+rng.IntN(5))
		var total int64
		for j := range packets {
			packets[j] = Packet{ID: id*100 + int64(j), AmountCents: 1 + rng.Int64N(50)}
			total += packets[j].AmountCents
		}
		var g Gates
		if i == 1 {
			g = Gates{StartsAt: expires.Add(-2 * time.Millisecond), PasswordDigest: "d", Recipients: []string{"u0", "u1", "u2", "u3"}}
		}
		if _, err := s.LoadGated(ctx, "", id, expires, total, packets, g); err != nil {
			t.Fatal(err)
		}
		switch i {
		case 2:
			s.rdb.HSet(ctx, s.keys.Meta(id), "status", MetaSuspended)
		case 3:
			s.rdb.HSet(ctx, s.keys.Meta(id), "status", MetaClosed)
		}
	}
	// A user who held a packet before this call.
	if _, err := s.Grab(ctx, envs[0], "u0", expires.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
}

func randomGrabs(s *Store, envs []int64, expires time.Time, rng *rand.Rand) []grabCall {
	ids := append(envs, 21, 25)
	n := 1 + rng.IntN(40)
	calls := make([]grabCall, n)
	for i := range calls {
		id := ids[rng.IntN(3)] // mostly the open ones
		if rng.IntN(4) == 0 {
			id = ids[rng.IntN(len(ids))]
		}
		now := expires.Add(time.Duration(rng.IntN(5)-3) * time.Millisecond)
		calls[i] = grabFor(s, id, fmt.Sprintf("u%d", rng.IntN(6)), now)
		calls[i].args[3] = []string{"", "d", "d", "x"}[rng.IntN(4)]
		calls[i].args[5] = []int{0, 0, 0, 1}[rng.IntN(4)]
	}
	return calls
}

// rebuild makes the same calls with another store's key names.
func rebuild(s *Store, calls []grabCall) []grabCall {
	out := make([]grabCall, len(calls))
	for i, g := range calls {
		out[i] = grabFor(s, g.args[2].(int64), g.args[0].(string), time.UnixMilli(g.args[1].(int64)))
		out[i].args[3], out[i].args[5] = g.args[3], g.args[5]
	}
	return out
}

// runGrabs makes one call of the grabs and returns each grab's code and
// claim (the call's code and numbers left differ between one call and many
// by design).
func runGrabs(t *testing.T, s *Store, calls []grabCall) []any {
	t.Helper()
	sc := &shardCall{}
	for _, g := range calls {
		sc.grabs = append(sc.grabs, &pendingGrab{call: g})
	}
	keys, args := s.grabArgs(sc)
	_, payload, err := grabScript.Run(context.Background(), s.rdb, keys, args...)
	if err != nil {
		t.Fatal(err)
	}
	return payload.([]any)[1:]
}

func dumpState(t *testing.T, s *Store, envs []int64) map[string]any {
	t.Helper()
	ctx := context.Background()
	out := map[string]any{"consumed": s.rdb.LRange(ctx, s.keys.Consumed(1), 0, -1).Val(),
		"orders": s.rdb.HMGet(ctx, s.keys.Orders(1, "20270115"), fieldCounter, fieldCeiling).Val()}
	for _, id := range append(envs, 21, 25) {
		out[fmt.Sprint(id, "meta")] = s.rdb.HGetAll(ctx, s.keys.Meta(id)).Val()
		out[fmt.Sprint(id, "pool")] = s.rdb.LRange(ctx, s.keys.Pool(id), 0, -1).Val()
		out[fmt.Sprint(id, "claims")] = ClaimsOf(ctx, s, id)
		out[fmt.Sprint(id, "recipients")] = s.rdb.SMembers(ctx, s.keys.Recipients(id)).Val()
	}
	return out
}
