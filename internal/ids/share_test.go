package ids

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// newShares returns a generator whose pool holds size entries, 10000 on.
func newShares(rdb redis.UniversalClient, keys redisstore.Keys, cfg ShareConfig, size int) *ShareCodes {
	s := NewShareCodes(rdb, keys, cfg)
	s.poolSize = size
	return s
}

// drainShares calls Next from goroutines spread over gens until every call
// says ErrExhausted, and returns the codes.
func drainShares(t *testing.T, ctx context.Context, gens []*ShareCodes, goroutines int) []string {
	t.Helper()
	var (
		mu     sync.Mutex
		codes  []string
		wg     sync.WaitGroup
		failed atomic.Value
	)
	for g := range goroutines {
		s := gens[g%len(gens)]
		wg.Go(func() {
			for {
				c, err := s.Next(ctx)
				if errors.Is(err, ErrExhausted) {
					return
				}
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
				mu.Lock()
				codes = append(codes, c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	return codes
}

// checkDayCodes asserts codes are date + each of 10000..10000+size-1 once.
func checkDayCodes(t *testing.T, codes []string, date string, size int) {
	t.Helper()
	suffixes := make([]int, 0, len(codes))
	for _, c := range codes {
		if len(c) != 11 || c[:6] != date {
			t.Fatalf("share code %q, want %s + 5 digits", c, date)
		}
		n, err := strconv.Atoi(c[6:])
		if err != nil {
			t.Fatalf("share code %q: %v", c, err)
		}
		suffixes = append(suffixes, n)
	}
	slices.Sort(suffixes)
	for i, n := range suffixes {
		if n != shareFirst+i {
			t.Fatalf("share codes of %s: sorted suffix %d is %d, want %d (repeat or hole)", date, i, n, shareFirst+i)
		}
	}
	if len(suffixes) != size {
		t.Fatalf("%d share codes of %s, want %d", len(suffixes), date, size)
	}
}

// TestShareUniqueConcurrent: two generators with no pool yet race to create
// it and then take the whole of a day's pool of 50: each code once, then
// ErrExhausted.
func TestShareUniqueConcurrent(t *testing.T) {
	t.Parallel()
	keys, rdbA, rdbB := twoClients(t)
	ctx := t.Context()
	clk := testenv.NewClock(time.Date(2025, 6, 30, 10, 0, 0, 0, time.UTC))
	const size = 50
	cfg := ShareConfig{Now: clk.Now}
	gens := []*ShareCodes{newShares(rdbA, keys, cfg, size), newShares(rdbB, keys, cfg, size)}

	codes := drainShares(t, ctx, gens, 16)
	checkDayCodes(t, codes, "250630", size)
	for _, s := range gens {
		if c, err := s.Next(ctx); !errors.Is(err, ErrExhausted) {
			t.Fatalf("Next after the pool = %q, %v; want ErrExhausted", c, err)
		}
	}
	checkDayTTL(t, rdbA, keys.ShareDay("250630"))
}

// TestSharePool checks the full pool: created once by concurrent first calls,
// every suffix 10000..99999 exactly once, shuffled, and not the same shuffle
// for another deployment.
func TestSharePool(t *testing.T) {
	t.Parallel()
	keys, rdbA, rdbB := twoClients(t)
	ctx := t.Context()
	codes := make([]string, 8)
	var wg sync.WaitGroup
	for i := range codes {
		s := NewShareCodes([]redis.UniversalClient{rdbA, rdbB}[i%2], keys, ShareConfig{})
		wg.Go(func() {
			c, err := s.Next(ctx)
			if err != nil {
				t.Errorf("Next: %v", err)
			}
			codes[i] = c
		})
	}
	wg.Wait()
	pool := readPool(t, rdbA, keys)
	// The first eight entries went out: every caller used the stored pool,
	// not one of the others it may have shuffled.
	taken := make([]string, 0, len(codes))
	for _, c := range codes {
		taken = append(taken, c[6:])
	}
	slices.Sort(taken)
	first := slices.Clone(pool[:len(codes)])
	slices.Sort(first)
	if !slices.Equal(taken, first) {
		t.Fatalf("codes %v are not the pool's first entries %v", taken, first)
	}

	other, _ := twoClientsKeys(t)
	if err := NewShareCodes(rdbA, other, ShareConfig{}).createPool(ctx); err != nil {
		t.Fatal(err)
	}
	if slices.Equal(pool[:100], readPool(t, rdbA, other)[:100]) {
		t.Fatal("two pools shuffled the same")
	}
}

func twoClientsKeys(t *testing.T) (redisstore.Keys, redis.UniversalClient) {
	keys, rdb, _ := twoClients(t)
	return keys, rdb
}

// readPool returns the stored pool's entries after checking it holds each
// suffix once and is not in order.
func readPool(t *testing.T, rdb redis.UniversalClient, keys redisstore.Keys) []string {
	t.Helper()
	raw, err := rdb.Get(context.Background(), keys.SharePool()).Result()
	if err != nil {
		t.Fatalf("GET pool: %v", err)
	}
	if len(raw) != sharePoolSize*shareEntryLen {
		t.Fatalf("pool of %d bytes, want %d", len(raw), sharePoolSize*shareEntryLen)
	}
	entries := make([]string, sharePoolSize)
	seen := make([]bool, sharePoolSize)
	ascending := 0
	for i := range entries {
		entries[i] = raw[i*shareEntryLen : (i+1)*shareEntryLen]
		n, err := strconv.Atoi(entries[i])
		if err != nil || n < shareFirst || n >= shareFirst+sharePoolSize || seen[n-shareFirst] {
			t.Fatalf("pool entry %d = %q: not a new suffix", i, entries[i])
		}
		seen[n-shareFirst] = true
		if i > 0 && entries[i] > entries[i-1] {
			ascending++
		}
	}
	// A shuffle rises about half the time; sorted would be always.
	if ascending > sharePoolSize*6/10 || ascending < sharePoolSize*4/10 {
		t.Fatalf("pool rises at %d of %d entries: not shuffled", ascending, sharePoolSize)
	}
	return entries
}

// TestShareDayChange: a day's counter and date part follow the injected
// clock across local midnight; codes of both days never repeat, and each
// day has its own pool of 10.
func TestShareDayChange(t *testing.T) {
	t.Parallel()
	for _, loc := range []*time.Location{time.UTC, shanghai} {
		t.Run(loc.String(), func(t *testing.T) {
			t.Parallel()
			keys, rdb, _ := twoClients(t)
			ctx := t.Context()
			clk := testenv.NewClock(lastInstant(2024, 12, 31, loc))
			const size = 10
			s := newShares(rdb, keys, ShareConfig{Location: loc, Now: clk.Now}, size)
			take := func(n int) []string {
				t.Helper()
				var codes []string
				for range n {
					c, err := s.Next(ctx)
					if err != nil {
						t.Fatalf("Next at %v: %v", clk.Now(), err)
					}
					codes = append(codes, c)
				}
				return codes
			}

			dec31 := take(6)
			clk.Set(time.Date(2025, 1, 1, 0, 0, 0, 0, loc))
			checkDayCodes(t, take(size), "250101", size)
			if c, err := s.Next(ctx); !errors.Is(err, ErrExhausted) {
				t.Fatalf("11th code of Jan 1 = %q, %v; want ErrExhausted", c, err)
			}
			// Back before midnight: Dec 31 goes on where it stopped.
			clk.Set(lastInstant(2024, 12, 31, loc))
			checkDayCodes(t, append(dec31, take(4)...), "241231", size)
			if c, err := s.Next(ctx); !errors.Is(err, ErrExhausted) {
				t.Fatalf("11th code of Dec 31 = %q, %v; want ErrExhausted", c, err)
			}
		})
	}
}

func TestShareExhaustedMessage(t *testing.T) {
	t.Parallel()
	keys, rdb, _ := twoClients(t)
	ctx := t.Context()
	s := newShares(rdb, keys, ShareConfig{Now: testenv.NewClock(time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC)).Now}, 1)
	if _, err := s.Next(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := s.Next(ctx)
	if !errors.Is(err, ErrExhausted) || !strings.Contains(err.Error(), "250102") {
		t.Fatalf("err = %v, want ErrExhausted naming the day", err)
	}
}

// NextOn takes the code of the day it is given, whatever the clock says,
// and passes over skip codes first: the codes it passed over come next to
// no one, and the day's counter moves past them.
func TestShareNextOnSkipsAndTakesItsDay(t *testing.T) {
	t.Parallel()
	keys, rdb, _ := twoClients(t)
	ctx := t.Context()
	day := time.Date(2025, 1, 2, 23, 59, 59, 0, time.UTC)
	s := newShares(rdb, keys, ShareConfig{Now: testenv.NewClock(day.Add(time.Second)).Now}, 10000)
	first, err := s.NextOn(ctx, day, 0)
	if err != nil || !strings.HasPrefix(first, "250102") {
		t.Fatalf("NextOn(2025-01-02) = %q, %v; want a code of 250102 (the clock is on the 3rd)", first, err)
	}
	skipped, err := s.NextOn(ctx, day, 2)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Get(ctx, keys.ShareDay("250102")).Int(); err != nil || n != 4 {
		t.Fatalf("the day's counter = %d, %v; want 4 (one, two passed over, one)", n, err)
	}
	checkDayTTL(t, rdb, keys.ShareDay("250102"))
	// From the start again: the fourth code is the one taken after the skip.
	if err := rdb.Del(ctx, keys.ShareDay("250102")).Err(); err != nil {
		t.Fatal(err)
	}
	var again []string
	for range 4 {
		c, err := s.NextOn(ctx, day, 0)
		if err != nil {
			t.Fatal(err)
		}
		again = append(again, c)
	}
	if again[0] != first || again[3] != skipped {
		t.Errorf("codes from the start %v; want %s first and %s fourth", again, first, skipped)
	}
}

// A skip stops at the day's last code rather than use the day up.
func TestShareSkipStopsAtTheLastCode(t *testing.T) {
	t.Parallel()
	keys, rdb, _ := twoClients(t)
	ctx := t.Context()
	day := time.Date(2025, 1, 2, 12, 0, 0, 0, time.UTC)
	s := newShares(rdb, keys, ShareConfig{}, 10)
	if _, err := s.NextOn(ctx, day, 0); err != nil {
		t.Fatal(err)
	}
	if c, err := s.NextOn(ctx, day, 1000); err != nil {
		t.Fatalf("a skip past the day's end: %q, %v; want its last code", c, err)
	}
	if n, _ := rdb.Get(ctx, keys.ShareDay("250102")).Int(); n != 10 {
		t.Errorf("the day's counter = %d, want 10 (the last code)", n)
	}
	if _, err := s.NextOn(ctx, day, 0); !errors.Is(err, ErrExhausted) {
		t.Errorf("after the last code: %v, want ErrExhausted", err)
	}
}
