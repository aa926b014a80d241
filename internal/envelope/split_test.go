package envelope

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// splitCases are the (total, count) pairs of the property tests: the edges
// (all 1s, a single packet), the contract's limits, and totals far beyond
// them to exercise the overflow care in doubleMeanBound.
var splitCases = []struct {
	total int64
	count int
}{
	{1, 1},
	{2, 1},
	{2, 2},
	{3, 2},
	{10, 10},
	{11, 10},
	{100, 3},
	{10000, 100},
	{12345, 678},
	{100000, 100000},
	{100001, 100000},
	{100000000, 100000},
	{100000000, 1},
	{100000000, 2},
	{1 << 62, 1},
	{1 << 62, 2},
	{1 << 62, 3},
	{1<<62 + 12345, 7},
	{1 << 62, 1000},
	{math.MaxInt64, 1},
	{math.MaxInt64, 2},
	{math.MaxInt64, 5},
	{math.MaxInt64 - 1, 3},
}

// checkAmounts asserts the invariants every split must satisfy.
func checkAmounts(t *testing.T, total int64, count int, amounts []int64) {
	t.Helper()
	if len(amounts) != count {
		t.Fatalf("Split(%d, %d): got %d amounts", total, count, len(amounts))
	}
	var sum int64
	for i, a := range amounts {
		if a < 1 {
			t.Fatalf("Split(%d, %d): amount[%d] = %d < 1", total, count, i, a)
		}
		// sum+a > total, written so a buggy split cannot overflow the check.
		if a > total-sum {
			t.Fatalf("Split(%d, %d): running sum exceeds total at index %d", total, count, i)
		}
		sum += a
	}
	if sum != total {
		t.Fatalf("Split(%d, %d): sum = %d", total, count, sum)
	}
}

// checkDoubleMean asserts that, in draw order, every amount but the last lies
// in [1, floor(2*remaining/left)). The bound is computed with math/big so the
// check does not share doubleMeanBound's arithmetic.
func checkDoubleMean(t *testing.T, total int64, ordered []int64) {
	t.Helper()
	remaining := big.NewInt(total)
	for i, a := range ordered[:len(ordered)-1] {
		left := big.NewInt(int64(len(ordered) - i))
		bound := new(big.Int).Lsh(remaining, 1)
		bound.Quo(bound, left)
		if a < 1 || big.NewInt(a).Cmp(bound) >= 0 {
			t.Fatalf("total %d: draw %d = %d outside [1, %s)", total, i, a, bound)
		}
		remaining.Sub(remaining, big.NewInt(a))
	}
	if last := ordered[len(ordered)-1]; remaining.Cmp(big.NewInt(last)) != 0 {
		t.Fatalf("total %d: last = %d, want the rest %s", total, last, remaining)
	}
}

func TestSplitInvariants(t *testing.T) {
	for _, c := range splitCases {
		for seed := range uint64(5) {
			r := rand.New(rand.NewPCG(seed, 2))
			amounts, err := Split(c.total, c.count, r)
			if err != nil {
				t.Fatalf("Split(%d, %d): %v", c.total, c.count, err)
			}
			checkAmounts(t, c.total, c.count, amounts)
		}
	}
}

func TestSplitAllOnes(t *testing.T) {
	for _, n := range []int{1, 2, 7, 100000} {
		amounts, err := Split(int64(n), n, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range amounts {
			if a != 1 {
				t.Fatalf("Split(%d, %d): amount[%d] = %d, want 1", n, n, i, a)
			}
		}
	}
}

func TestSplitSingle(t *testing.T) {
	for _, total := range []int64{1, 99, 100000000, math.MaxInt64} {
		amounts, err := Split(total, 1, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		if len(amounts) != 1 || amounts[0] != total {
			t.Fatalf("Split(%d, 1) = %v", total, amounts)
		}
	}
}

func TestSplitDoubleMeanBound(t *testing.T) {
	for _, c := range splitCases {
		for seed := range uint64(5) {
			ordered, err := splitOrdered(c.total, c.count, math.MaxInt64, rand.New(rand.NewPCG(seed, 2)))
			if err != nil {
				t.Fatal(err)
			}
			checkAmounts(t, c.total, c.count, ordered)
			checkDoubleMean(t, c.total, ordered)
		}
	}
}

func TestDoubleMeanBound(t *testing.T) {
	rems := []int64{2, 3, 4, 5, 99, 100, 101, 1 << 31, 1<<62 - 1, 1 << 62, 1<<62 + 1, math.MaxInt64 - 1, math.MaxInt64}
	ns := []int64{2, 3, 4, 7, 100, 100000, 1<<31 + 1, 1 << 61, math.MaxInt64/2 + 1, math.MaxInt64 - 1, math.MaxInt64}
	for _, rem := range rems {
		for _, n := range ns {
			if n > rem {
				continue
			}
			want := new(big.Int).Lsh(big.NewInt(rem), 1)
			want.Quo(want, big.NewInt(n))
			if got := doubleMeanBound(rem, n); big.NewInt(got).Cmp(want) != 0 {
				t.Errorf("doubleMeanBound(%d, %d) = %d, want %s", rem, n, got, want)
			}
		}
	}
}

// TestSplitIsShuffledOrdered checks that Split is the draw-order split
// followed by a shuffle with the same source: the same multiset of amounts,
// but (for most seeds) in a different order.
func TestSplitIsShuffledOrdered(t *testing.T) {
	const seeds = 50
	reordered := 0
	for seed := range uint64(seeds) {
		ordered, err := splitOrdered(10000, 100, math.MaxInt64, rand.New(rand.NewPCG(seed, 2)))
		if err != nil {
			t.Fatal(err)
		}
		shuffled, err := Split(10000, 100, rand.New(rand.NewPCG(seed, 2)))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(shuffled, ordered) {
			reordered++
		}
		slices.Sort(ordered)
		slices.Sort(shuffled)
		if !slices.Equal(shuffled, ordered) {
			t.Fatalf("seed %d: Split is not a permutation of the draw-order split", seed)
		}
	}
	if reordered < seeds-1 {
		t.Fatalf("only %d of %d splits were reordered by the shuffle", reordered, seeds)
	}
}

// TestSplitPositionsUniform checks the point of the shuffle: no position is
// favoured. In draw order the late packets have the widest spread, so for
// count=100 the largest packet is among the last 10 in about 44% of splits;
// after the shuffle it must be there in about 10%, like any other 10
// positions. Fixed seeds keep the test deterministic; the tolerance is about
// 4.5 standard deviations wide.
func TestSplitPositionsUniform(t *testing.T) {
	const (
		trials = 5000
		count  = 100
		window = 10
	)
	r := rand.New(rand.NewPCG(1, 2))
	first, last := 0, 0
	for range trials {
		amounts, err := Split(10000, count, r)
		if err != nil {
			t.Fatal(err)
		}
		switch i := indexOfMax(amounts); {
		case i < window:
			first++
		case i >= count-window:
			last++
		}
	}
	for name, n := range map[string]int{"first": first, "last": last} {
		if frac := float64(n) / trials; frac < 0.08 || frac > 0.12 {
			t.Errorf("largest packet in the %s %d positions in %.3f of splits, want about 0.10", name, window, frac)
		}
	}
}

func indexOfMax(s []int64) int {
	best := 0
	for i, v := range s {
		if v > s[best] {
			best = i
		}
	}
	return best
}

// TestShuffleUniform checks the Fisher-Yates step on its own: every element
// lands in every position about equally often.
func TestShuffleUniform(t *testing.T) {
	const (
		trials = 20000
		n      = 4
	)
	r := rand.New(rand.NewPCG(1, 2))
	var at [n][n]int // at[value][position]
	s := make([]int64, n)
	for range trials {
		for i := range s {
			s[i] = int64(i)
		}
		shuffle(s, r)
		for pos, v := range s {
			at[v][pos]++
		}
	}
	for v := range n {
		for pos := range n {
			if frac := float64(at[v][pos]) / trials; frac < 0.22 || frac > 0.28 {
				t.Errorf("value %d at position %d in %.3f of shuffles, want 0.25", v, pos, frac)
			}
		}
	}
}

func TestSplitErrors(t *testing.T) {
	cases := []struct {
		total int64
		count int
		field string
	}{
		{10, 0, "count"},
		{10, -1, "count"},
		{0, 0, "count"},
		{math.MaxInt64, math.MinInt, "count"},
		{0, 1, "total_cents"},
		{-5, 1, "total_cents"},
		{9, 10, "total_cents"},
		{99999, 100000, "total_cents"},
		{math.MinInt64, 1, "total_cents"},
	}
	for _, c := range cases {
		amounts, err := Split(c.total, c.count, rand.New(rand.NewPCG(1, 2)))
		if err == nil {
			t.Errorf("Split(%d, %d) = %v, want error", c.total, c.count, amounts)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Split(%d, %d): error %v does not wrap ErrInvalid", c.total, c.count, err)
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("Split(%d, %d): error %v, want field %q", c.total, c.count, err, c.field)
		}
	}
}

func TestNewRand(t *testing.T) {
	// Two generators seeded from crypto/rand must not produce the same
	// stream; equal first 64-bit outputs would mean a fixed seed.
	a, b := NewRand(), NewRand()
	a1, b1 := a.Uint64(), b.Uint64()
	a2, b2 := a.Uint64(), b.Uint64()
	if a1 == b1 && a2 == b2 {
		t.Fatal("two NewRand generators produced the same stream")
	}
	amounts, err := Split(10000, 100, NewRand())
	if err != nil {
		t.Fatal(err)
	}
	checkAmounts(t, 10000, 100, amounts)
}

func FuzzSplit(f *testing.F) {
	f.Add(int64(1), 1, uint64(0))
	f.Add(int64(10), 10, uint64(1))
	f.Add(int64(10000), 100, uint64(2))
	f.Add(int64(100000000), 5000, uint64(3))
	f.Add(int64(1<<62), 3, uint64(4))
	f.Add(int64(math.MaxInt64), 2, uint64(5))
	f.Add(int64(9), 10, uint64(6))
	f.Add(int64(0), 0, uint64(7))
	f.Add(int64(-1), -1, uint64(8))
	f.Fuzz(func(t *testing.T, total int64, count int, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 2))
		if count < 1 || total < int64(count) {
			// Split rejects before allocating, so a huge count is cheap here.
			if _, err := Split(total, count, r); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Split(%d, %d): err = %v, want ErrInvalid", total, count, err)
			}
			return
		}
		// Fold count into 1..5000 to keep each run fast; it stays <= total.
		count = 1 + (count-1)%5000
		amounts, err := Split(total, count, r)
		if err != nil {
			t.Fatalf("Split(%d, %d): %v", total, count, err)
		}
		checkAmounts(t, total, count, amounts)
		ordered, err := splitOrdered(total, count, math.MaxInt64, rand.New(rand.NewPCG(seed, 2)))
		if err != nil {
			t.Fatalf("splitOrdered(%d, %d): %v", total, count, err)
		}
		checkDoubleMean(t, total, ordered)
	})
}

func BenchmarkSplit100000(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Split(100000000, 100000, r); err != nil {
			b.Fatal(err)
		}
	}
}
