package sequence

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/db/dbsqlc"
)

// reserveAttempts bounds the retries of a transient failure.
const reserveAttempts = 3

// pgSource reserves ranges of one key of the table sequence_numbers.
type pgSource struct {
	pool *pgxpool.Pool
	key  string
}

// Reserve advances the key's row and returns the reserved range
// [first, first+n). With exact it reserves exactly want ids or nothing;
// otherwise it reserves want ids (the row's step when want is 0), or whatever
// is left before max_value.
func (s *pgSource) Reserve(ctx context.Context, want int64, exact bool) (first, n int64, err error) {
	for attempt := 1; ; attempt++ {
		first, n, err = s.reserveOnce(ctx, want, exact)
		if err == nil || attempt == reserveAttempts || !isTransient(err) {
			return first, n, err
		}
	}
}

func (s *pgSource) reserveOnce(ctx context.Context, want int64, exact bool) (first, n int64, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		row, err := q.LockSequence(ctx, s.key)
		if err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrUnknownKey
			}
			return fmt.Errorf("lock row: %w", err)
		}
		if n, err = rangeSize(row.MaxValue-row.CurrentValue, int64(row.Step), want, exact); err != nil {
			return err
		}
		if err := q.AdvanceSequence(ctx, dbsqlc.AdvanceSequenceParams{KeyName: s.key, CurrentValue: row.CurrentValue + n}); err != nil {
			return fmt.Errorf("advance row: %w", err)
		}
		first = row.CurrentValue + 1
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return first, n, nil
}

// rangeSize decides how many ids to reserve when left remain before max_value.
func rangeSize(left, rowStep, want int64, exact bool) (int64, error) {
	if exact {
		if left < want {
			return 0, fmt.Errorf("%w: %d ids asked, %d left", ErrExhausted, want, left)
		}
		return want, nil
	}
	n := want
	if n <= 0 {
		n = rowStep
	}
	n = min(n, left)
	if n <= 0 {
		return 0, ErrExhausted
	}
	return n, nil
}

// isTransient reports the PostgreSQL errors after which the whole
// transaction is simply tried again: they can only occur when the server
// runs transactions above READ COMMITTED or under lock contention, and
// retrying is what the server asks for.
func isTransient(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Code == pgerrcode.SerializationFailure || pgErr.Code == pgerrcode.DeadlockDetected
}
