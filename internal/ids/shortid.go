package ids

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"redpacket/internal/db/dbsqlc"
	rs "redpacket/internal/redisscript"
	"redpacket/internal/redisstore"
)

const (
	defaultShortMin = 10000000
	defaultShortMax = 99999999
	// maxShortBits keeps the bitmap within a Redis string (512 MB).
	maxShortBits = 1 << 32
	// claimTries bounds the ids tried for one user when PostgreSQL already
	// holds the ones the bitmap offers, which only a stale bitmap does.
	claimTries = 16
	// pickTries bounds the rebuilds of one call: a second "rebuild" right
	// after one means the keys vanish as fast as they are made.
	pickTries = 3
	// rebuildPage is how many short ids one query and one pipeline carry.
	rebuildPage = 10000
)

// ShortIDConfig sets the range of short ids; the zero value means
// 10000000..99999999.
type ShortIDConfig struct {
	Min, Max int64 // inclusive
}

// ShortIDs gives each user one short numeric id for life. PostgreSQL
// (user_short_ids) is the truth; a Redis bitmap over the range finds a free
// id in one round trip and is rebuilt from PostgreSQL when Redis loses it. It
// is safe for concurrent use and holds no goroutine.
type ShortIDs struct {
	rdb  redis.UniversalClient
	keys redisstore.Keys
	pg   *dbsqlc.Queries
	min  int64
	bits int64 // ids in the range, Max-Min+1

	rebuildMu sync.Mutex // one rebuild per process at a time
}

// NewShortIDs returns a short-id generator. It panics on a range that is
// empty, negative (short_id >= 0 in PostgreSQL) or too large for a Redis
// bitmap: a programming error no later call could recover from.
func NewShortIDs(rdb redis.UniversalClient, keys redisstore.Keys, pool *pgxpool.Pool, cfg ShortIDConfig) *ShortIDs {
	if cfg == (ShortIDConfig{}) {
		cfg = ShortIDConfig{Min: defaultShortMin, Max: defaultShortMax}
	}
	if cfg.Min < 0 || cfg.Max < cfg.Min || cfg.Max-cfg.Min >= maxShortBits {
		panic(fmt.Sprintf("ids: short id range %d..%d invalid", cfg.Min, cfg.Max))
	}
	return &ShortIDs{rdb: rdb, keys: keys, pg: dbsqlc.New(pool), min: cfg.Min, bits: cfg.Max - cfg.Min + 1}
}

// Get returns the user's short id, allocating one on first use. A full range
// is an error wrapping ErrExhausted.
func (s *ShortIDs) Get(ctx context.Context, userID string) (int64, error) {
	if userID == "" {
		return 0, errors.New("short id: empty user id")
	}
	id, found, err := s.lookup(ctx, userID)
	if err != nil || found {
		return id, err
	}
	for range claimTries {
		offset, err := s.pick(ctx)
		if err != nil {
			return 0, err
		}
		id, ok, err := s.claim(ctx, userID, offset)
		if err != nil || ok {
			return id, err
		}
	}
	return 0, fmt.Errorf("short id of %q: %d ids offered by the bitmap were already in PostgreSQL", userID, claimTries)
}

func (s *ShortIDs) lookup(ctx context.Context, userID string) (id int64, found bool, err error) {
	id, err = s.pg.ShortIDOf(ctx, userID)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("short id of %q: look up: %w", userID, err)
	}
	return id, true, nil
}

// claim records the id at offset for the user. ok is false when PostgreSQL
// already holds that id for someone else (the bitmap was stale): its bit stays
// set, now correctly, and the caller tries another.
func (s *ShortIDs) claim(ctx context.Context, userID string, offset int64) (id int64, ok bool, err error) {
	id = s.min + offset
	inserted, err := s.pg.InsertShortID(ctx, dbsqlc.InsertShortIDParams{UserID: userID, ShortID: id})
	if err != nil {
		// The bit stays set: the row may have been written before the
		// error, and an id lost costs less than one offered twice.
		return 0, false, fmt.Errorf("short id of %q: insert %d: %w", userID, id, err)
	}
	if inserted == 1 {
		return id, true, nil
	}
	stored, idTaken, err := s.conflicts(ctx, userID, id)
	if err != nil || stored < 0 {
		return 0, false, err
	}
	// The user got an id concurrently. Ours is in no row, so its bit goes
	// back; a bit PostgreSQL holds must stay set.
	if !idTaken {
		if err := s.rdb.SetBit(ctx, s.keys.ShortIDs(), offset, 0).Err(); err != nil {
			return 0, false, fmt.Errorf("short id of %q: release %d: %w", userID, id, err)
		}
	}
	return stored, true, nil
}

// conflicts returns the user's stored id (-1 if none) and whether id belongs
// to a row, after an insert of (userID, id) did nothing.
func (s *ShortIDs) conflicts(ctx context.Context, userID string, id int64) (stored int64, idTaken bool, err error) {
	rows, err := s.pg.ShortIDConflicts(ctx, dbsqlc.ShortIDConflictsParams{UserID: userID, ShortID: id})
	if err != nil {
		return 0, false, fmt.Errorf("short id of %q: read conflicts: %w", userID, err)
	}
	stored = -1
	for _, r := range rows {
		if r.UserID == userID {
			stored = r.ShortID
		}
		idTaken = idTaken || r.ShortID == id
	}
	return stored, idTaken, nil
}

// pick claims a clear bit, rebuilding the bitmap first if Redis lost it.
func (s *ShortIDs) pick(ctx context.Context) (int64, error) {
	keys := []string{s.keys.ShortIDs(), s.keys.ShortIDsReady()}
	for range pickTries {
		// math/rand/v2's global source is seeded from the runtime's
		// cryptographic randomness.
		start := rand.Int64N((s.bits + 7) / 8)
		code, offset, err := pickScript.Run(ctx, s.rdb, keys, s.bits, start)
		if err != nil {
			return 0, fmt.Errorf("short id: pick: %w", err)
		}
		switch code {
		case pickClaimed:
			off, err := rs.Int(offset)
			if err != nil || off < 0 || off >= s.bits {
				return 0, fmt.Errorf("short id: pick: offset %#v outside the range: %w", offset, err)
			}
			return off, nil
		case pickFull:
			return 0, fmt.Errorf("short id: all %d ids from %d taken: %w", s.bits, s.min, ErrExhausted)
		case pickRebuild:
			if err := s.rebuild(ctx); err != nil {
				return 0, err
			}
		default:
			return 0, fmt.Errorf("short id: pick: unhandled reply code %d", code)
		}
	}
	return 0, errors.New("short id: the bitmap vanished after each rebuild")
}

// rebuild sets the bit of every short id in PostgreSQL, then the ready flag,
// so no id is handed out from a bitmap missing ids in use. Processes may
// rebuild at once: setting a bit twice is harmless. An id inserted while a
// rebuild reads may miss its bit; the unique short_id column then turns it
// down and claim moves on.
func (s *ShortIDs) rebuild(ctx context.Context) error {
	s.rebuildMu.Lock()
	defer s.rebuildMu.Unlock()
	keys := []string{s.keys.ShortIDs(), s.keys.ShortIDsReady()}
	n, err := s.rdb.Exists(ctx, keys...).Result()
	if err != nil {
		return fmt.Errorf("short id: rebuild: %w", err)
	}
	if n == int64(len(keys)) {
		return nil // another caller of this process rebuilt it meanwhile
	}
	for after := s.min - 1; ; {
		page, err := s.page(ctx, after)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return s.markReady(ctx, keys)
		}
		if err := s.setBits(ctx, page); err != nil {
			return err
		}
		after = page[len(page)-1]
	}
}

// page returns up to rebuildPage short ids of the range above after, in
// order: keyset pagination on the unique index, so no page costs more than
// the one before.
func (s *ShortIDs) page(ctx context.Context, after int64) ([]int64, error) {
	ids, err := s.pg.ShortIDPage(ctx, dbsqlc.ShortIDPageParams{After: after, Last: s.min + s.bits - 1, MaxRows: rebuildPage})
	if err != nil {
		return nil, fmt.Errorf("short id: rebuild: read ids: %w", err)
	}
	return ids, nil
}

func (s *ShortIDs) setBits(ctx context.Context, ids []int64) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range ids {
			p.SetBit(ctx, s.keys.ShortIDs(), id-s.min, 1)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("short id: rebuild: set bits: %w", err)
	}
	return nil
}

func (s *ShortIDs) markReady(ctx context.Context, keys []string) error {
	if _, _, err := readyScript.Run(ctx, s.rdb, keys, s.bits-1); err != nil {
		return fmt.Errorf("short id: rebuild: mark ready: %w", err)
	}
	return nil
}
