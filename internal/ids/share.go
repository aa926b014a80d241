package ids

import (
	"context"
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	rs "redpacket/internal/redisscript"
	"redpacket/internal/redisstore"
)

const (
	shareFirst      = 10000 // the smallest suffix
	sharePoolSize   = 90000 // suffixes 10000..99999
	shareEntryLen   = 5
	shareDateLayout = "060102"
	// sharePoolTries bounds the calls that find no pool: one creates it, so
	// a second miss means something deletes it as fast as it is made.
	sharePoolTries = 3
)

// ShareConfig tunes ShareCodes; the zero value is usable.
type ShareConfig struct {
	// Location is where days begin and end; nil means UTC.
	Location *time.Location
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// ShareCodes hands out share codes "yyMMdd" + 5 digits. The digits are
// entries of one pool, 10000..99999 shuffled once and kept in Redis, taken in
// order by a per-day counter: unique within a day across processes, and they
// do not tell how many envelopes were made that day. It is safe for
// concurrent use and holds no goroutine.
type ShareCodes struct {
	rdb  redis.UniversalClient
	keys redisstore.Keys
	loc  *time.Location
	now  func() time.Time
	// poolSize is the number of entries, from 10000 on; tests shrink it to
	// reach the end of a day's pool.
	poolSize int
}

// NewShareCodes returns a share-code generator. The pool is created in Redis
// by the first Next that finds none.
func NewShareCodes(rdb redis.UniversalClient, keys redisstore.Keys, cfg ShareConfig) *ShareCodes {
	return &ShareCodes{
		rdb:      rdb,
		keys:     keys,
		loc:      orDefault(cfg.Location, time.UTC),
		now:      nowOr(cfg.Now),
		poolSize: sharePoolSize,
	}
}

// Next returns a share code of the current day. When the day's pool is used
// up it returns an error wrapping ErrExhausted, never a code given before.
func (s *ShareCodes) Next(ctx context.Context) (string, error) {
	return s.NextOn(ctx, s.now(), 0)
}

// NextOn returns a share code of now's day, passing over skip codes of the
// day first. Skipping is for a code found already in use: the day's counter
// went back (Redis restarted from an older file), so the codes after it
// were handed out before, and the caller skips ahead, further each time,
// rather than trying them one by one.
func (s *ShareCodes) NextOn(ctx context.Context, now time.Time, skip int) (string, error) {
	date := now.In(s.loc).Format(shareDateLayout)
	keys := []string{s.keys.SharePool(), s.keys.ShareDay(date)}
	ttl := int64(dayKeyTTL / time.Second)
	for try := 1; ; try++ {
		code, entry, err := shareScript.Run(ctx, s.rdb, keys, s.poolSize, ttl, skip)
		if err != nil {
			return "", fmt.Errorf("share code: take: %w", err)
		}
		switch {
		case code == shareTaken:
			suffix, err := rs.String(entry)
			if err != nil || len(suffix) != 5 {
				return "", fmt.Errorf("share code: entry %#v is not 5 digits: %w", entry, err)
			}
			return date + suffix, nil
		case code == shareUsedUp:
			return "", fmt.Errorf("share code of %s: all %d taken: %w", date, s.poolSize, ErrExhausted)
		case code == shareNoPool && try < sharePoolTries:
			if err := s.createPool(ctx); err != nil {
				return "", err
			}
		case code == shareNoPool:
			return "", errors.New("share code: the pool vanished after being created")
		default:
			return "", fmt.Errorf("share code: unhandled reply code %d", code)
		}
	}
}

// createPool stores a freshly shuffled pool unless one exists: processes
// starting together each shuffle one, and SET NX keeps the first, so every
// process indexes the same permutation.
func (s *ShareCodes) createPool(ctx context.Context) error {
	pool, err := shuffledPool(s.poolSize)
	if err != nil {
		return err
	}
	if err := s.rdb.SetNX(ctx, s.keys.SharePool(), pool, 0).Err(); err != nil {
		return fmt.Errorf("share code: create pool: %w", err)
	}
	return nil
}

// shuffledPool returns shareFirst..shareFirst+size-1 in a random order as
// 5-byte entries. The shuffle is seeded from crypto/rand so the order cannot
// be predicted from other outputs of a weaker generator.
func shuffledPool(size int) ([]byte, error) {
	if size < 1 || size > sharePoolSize {
		return nil, fmt.Errorf("share code: pool size %d outside 1..%d", size, sharePoolSize)
	}
	var seed [32]byte
	if _, err := cryptorand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("share code: seed the shuffle: %w", err)
	}
	perm := rand.New(rand.NewChaCha8(seed)).Perm(size)
	pool := make([]byte, 0, size*shareEntryLen)
	for _, p := range perm {
		pool = strconv.AppendInt(pool, int64(shareFirst+p), 10)
	}
	return pool, nil
}
