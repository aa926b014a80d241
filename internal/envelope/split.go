package envelope

import (
	cryptorand "crypto/rand"
	"math/rand/v2"
)

// Split divides total cents into count packets: every packet >= 1 cent, the
// sum exactly total. Each amount but the last is drawn uniformly from
// [1, 2*remaining/remaining_count) (the double-mean rule, see the package
// documentation), the last takes the rest; then the slice is shuffled
// (Fisher-Yates) with the same source. It errors (wrapping ErrInvalid) when
// count < 1 or total < count. r must not be nil.
//
// Split does not apply Limits: callers validate the request first, since the
// result is a slice of count amounts.
func Split(total int64, count int, r *rand.Rand) ([]int64, error) {
	return SplitCapped(total, count, total, r)
}

// SplitCapped is Split with no packet above maxPacket cents: each draw is
// also held to [remaining - (left-1)*maxPacket, maxPacket], so the packets
// after it can still take the rest (a draw the double-mean bound would put
// below that range takes its lower end). It errors when the total cannot fit:
// total > count * maxPacket.
func SplitCapped(total int64, count int, maxPacket int64, r *rand.Rand) ([]int64, error) {
	if count >= 1 && maxPacket >= 1 && (total+int64(count)-1)/int64(count) > maxPacket {
		return nil, &FieldError{Field: "total_cents", Problem: "must be at most count × the largest packet"}
	}
	amounts, err := splitOrdered(total, count, maxPacket, r)
	if err != nil {
		return nil, err
	}
	shuffle(amounts, r)
	return amounts, nil
}

// splitOrdered does the double-mean draws in draw order, without the
// shuffle, so tests can check each draw against the bound it was drawn under.
func splitOrdered(total int64, count int, maxPacket int64, r *rand.Rand) ([]int64, error) {
	if count < 1 {
		return nil, &FieldError{Field: "count", Problem: "must be at least 1"}
	}
	if total < int64(count) {
		return nil, &FieldError{Field: "total_cents", Problem: "must be at least count (every packet is at least 1 cent)"}
	}
	amounts := make([]int64, count)
	remaining := total
	for i := range count - 1 {
		// The bound is at least 2 because remaining >= packets left, so the
		// range [1, bound) is never empty; and bound-1 <= remaining-(left-1),
		// so the packets after this one can still get 1 cent each.
		left := int64(count - i)
		bound := doubleMeanBound(remaining, left)
		lo, hi := int64(1), min(bound-1, maxPacket)
		// remaining <= left*maxPacket holds before each draw, so lo <=
		// maxPacket, and remaining-a <= (left-1)*maxPacket after it.
		// (left-1)*maxPacket is formed only when it is at most remaining,
		// so it cannot overflow.
		if remaining/maxPacket >= left-1 {
			lo = max(lo, remaining-(left-1)*maxPacket)
		}
		hi = max(hi, lo)
		a := lo + r.Int64N(hi-lo+1)
		amounts[i] = a
		remaining -= a
	}
	amounts[count-1] = remaining
	return amounts, nil
}

// Fixed divides total into count packets of total / count each; it errors
// (wrapping ErrInvalid) when that is not a whole number of cents.
func Fixed(total int64, count int) ([]int64, error) {
	if count < 1 || total < int64(count) || total%int64(count) != 0 {
		return nil, &FieldError{Field: "total_cents", Problem: "must be a multiple of count for a fixed envelope"}
	}
	amounts := make([]int64, count)
	for i := range amounts {
		amounts[i] = total / int64(count)
	}
	return amounts, nil
}

// doubleMeanBound returns floor(2*remaining/n) for remaining >= n >= 2
// without forming 2*remaining, which overflows int64 for totals above 2^62.
// With remaining = q*n + rem (0 <= rem < n), 2*remaining/n is 2q plus 1 when
// 2*rem >= n; 2q <= remaining cannot overflow since n >= 2, and the test
// 2*rem >= n is written as rem >= n-rem so it cannot overflow either.
func doubleMeanBound(remaining, n int64) int64 {
	q, rem := remaining/n, remaining%n
	b := 2 * q
	if rem >= n-rem {
		b++
	}
	return b
}

// shuffle is a Fisher-Yates shuffle with the given source; rand.Rand.Shuffle
// implements exactly that and draws its indexes without modulo bias.
func shuffle(amounts []int64, r *rand.Rand) {
	r.Shuffle(len(amounts), func(i, j int) {
		amounts[i], amounts[j] = amounts[j], amounts[i]
	})
}

// NewRand returns a *rand.Rand (math/rand/v2, ChaCha8) seeded from
// crypto/rand, so packet amounts cannot be predicted from earlier envelopes.
// It is not safe for concurrent use; callers make one per goroutine or guard
// it.
func NewRand() *rand.Rand {
	var seed [32]byte
	// Since Go 1.24 crypto/rand.Read never returns an error: it always fills
	// the buffer or crashes the program.
	_, _ = cryptorand.Read(seed[:])
	return rand.New(rand.NewChaCha8(seed))
}
