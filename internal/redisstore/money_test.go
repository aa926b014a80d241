package redisstore

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"redpacket/internal/testenv"
)

// TestGrabRefusesInexactMoney: an envelope whose Redis state would make the
// grab script's sums inexact or wrong (a total of 1e17 cents, whose Lua
// number Redis would be handed as "1e+17"; a packet worth more than is left;
// a grabbed_cents that is not a number) is refused with ErrBadState, and
// nothing of it changes, while the other envelopes of the same call are
// granted as usual. Before the checks, such a call popped the packet and
// recorded the claim, then failed on HINCRBY: the claim was never queued,
// the user was answered 503, then 200 as a repeat, and the packet refunded.
func TestGrabRefusesInexactMoney(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	ctx := context.Background()
	now := time.Now()
	for name, spoil := range map[string]func(s *Store, id int64){
		"total of 1e17 cents": func(s *Store, id int64) {
			s.rdb.HSet(ctx, s.keys.Meta(id), fieldTotal, "100000000000000000")
			s.rdb.RPush(ctx, s.keys.Pool(id), "999:99999999999999990")
		},
		"total as a float": func(s *Store, id int64) { s.rdb.HSet(ctx, s.keys.Meta(id), fieldTotal, "1e17") },
		"packet worth more than is left": func(s *Store, id int64) {
			s.rdb.RPush(ctx, s.keys.Pool(id), "999:11")
		},
		"packet not numbers":     func(s *Store, id int64) { s.rdb.RPush(ctx, s.keys.Pool(id), "999:1.5") },
		"grabbed not a number":   func(s *Store, id int64) { s.rdb.HSet(ctx, s.keys.Meta(id), fieldGrabbedCents, "lost") },
		"grabbed over the total": func(s *Store, id int64) { s.rdb.HSet(ctx, s.keys.Meta(id), fieldGrabbedCents, 11) },
		"expiry not a number":    func(s *Store, id int64) { s.rdb.HSet(ctx, s.keys.Meta(id), fieldExpires, "soon") },
	} {
		t.Run(name, func(t *testing.T) {
			s := New(rdb, prefix+":"+name, 4)
			newMemNumbering(s, 10, 100, time.UTC)
			// 1 and 5 are on shard 1: one call decides both.
			for _, id := range []int64{1, 5} {
				if _, err := s.LoadEnvelope(ctx, id, now.Add(time.Hour), 10, []Packet{{ID: id * 100, AmountCents: 4}, {ID: id*100 + 1, AmountCents: 6}}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Grab(ctx, 1, "holder", now); err != nil {
				t.Fatal(err)
			}
			spoil(s, 1)
			before := dumpEnvelope(t, s, 1)
			queued := s.rdb.LLen(ctx, s.keys.Consumed(1)).Val()
			sc := &shardCall{}
			for _, g := range []grabCall{grabFor(s, 1, "a", now), grabFor(s, 5, "b", now), grabFor(s, 1, "holder", now), grabFor(s, 5, "c", now)} {
				sc.grabs = append(sc.grabs, &pendingGrab{call: g})
			}
			keys, args := s.grabArgs(sc)
			sc.cmd = grabScript.Script.Run(ctx, s.rdb, keys, args...)
			var got []error
			for _, r := range s.replies(sc) {
				_, err := r.claim()
				got = append(got, err)
			}
			// A holder is answered from the claims whatever the rest says.
			if !errors.Is(got[0], ErrBadState) || got[1] != nil || got[2] != nil || got[3] != nil {
				t.Errorf("answers %v; want bad state, granted, the holder's repeat, granted", got)
			}
			if after := dumpEnvelope(t, s, 1); !reflect.DeepEqual(after, before) {
				t.Errorf("the refused envelope changed:\n%v\nwas\n%v", after, before)
			}
			if n := s.rdb.LLen(ctx, s.keys.Consumed(1)).Val(); n != queued+2 {
				t.Errorf("queue grew by %d, want the 2 grants of envelope 5", n-queued)
			}
		})
	}
}

func dumpEnvelope(t *testing.T, s *Store, id int64) map[string]any {
	t.Helper()
	ctx := context.Background()
	return map[string]any{
		"meta":   s.rdb.HGetAll(ctx, s.keys.Meta(id)).Val(),
		"pool":   s.rdb.LRange(ctx, s.keys.Pool(id), 0, -1).Val(),
		"claims": ClaimsOf(ctx, s, id),
	}
}

// TestLoadChecksMoney: a total beyond exact integers, packets worth more
// than it, or a packet of no cents are refused before Redis is asked;
// the script refuses bad arguments before its first write too.
func TestLoadChecksMoney(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	s := New(rdb, prefix, 4)
	ctx := context.Background()
	exp := time.Now().Add(time.Hour)
	for _, c := range []struct {
		total   int64
		packets []Packet
	}{
		{1e17, []Packet{{ID: 1, AmountCents: 1e17}}},
		{1 << 53, []Packet{{ID: 1, AmountCents: 1 << 53}}},
		{10, []Packet{{ID: 1, AmountCents: 6}, {ID: 2, AmountCents: 5}}},
		{10, []Packet{{ID: 1, AmountCents: 10}, {ID: 2, AmountCents: 0}}},
		{10, []Packet{{ID: 1, AmountCents: 11}, {ID: 2, AmountCents: -1}}},
		{10, nil},
	} {
		if _, err := s.LoadEnvelope(ctx, 7, exp, c.total, c.packets); err == nil {
			t.Errorf("load of %d cents in %v accepted", c.total, c.packets)
		}
	}
	keys := []string{s.keys.Meta(7), s.keys.Pool(7), s.keys.Claims(7), s.keys.Epoch(3), s.keys.Recipients(7), s.keys.ClaimsBucket(7, 1, 0)}
	for _, args := range [][]any{
		{exp.UnixMilli(), 1, "1e17", "", "1:100000000000000000"},
		{exp.UnixMilli(), 2, 10, "", "1:10"}, // count differs from the packets
		{"soon", 1, 10, "", "1:10"},
	} {
		if _, _, err := loadScript.Run(ctx, rdb, keys, args...); err == nil {
			t.Errorf("load.lua %v: no error", args)
		}
	}
	if n := rdb.Exists(ctx, keys...).Val(); n != 0 {
		t.Errorf("refused loads left %d keys", n)
	}
}
