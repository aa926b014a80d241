package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/db/dbsqlc"
)

// SharedSetting is a setting the processes of one ledger that use it must
// all be started with (table shared_settings).
type SharedSetting struct {
	Name  string // its name in shared_settings
	Env   string // the environment variable that sets it, for the message
	Value string
}

// ErrSettingDiffers means a process was started with a shared setting other
// than the ledger's (a *SettingMismatch says which).
var ErrSettingDiffers = errors.New("a setting every process must share differs from the ledger's")

// SettingMismatch is a shared setting this process has other than the one
// recorded.
type SettingMismatch struct {
	Setting    SharedSetting
	Recorded   string
	RecordedAt time.Time
	RecordedBy string
}

func (m *SettingMismatch) Error() string {
	return fmt.Sprintf("%s is %q here but %q for this ledger (recorded %s by %s): the processes of one database "+
		"that use it must share it; start this one with %s=%s, or see docs/dba.md, \"Shared settings\", to change it", m.Setting.Env, m.Setting.Value, m.Recorded,
		m.RecordedAt.UTC().Format(time.RFC3339), m.RecordedBy, m.Setting.Env, m.Recorded)
}

func (m *SettingMismatch) Unwrap() error { return ErrSettingDiffers }

// CheckShared compares settings with those the ledger recorded. A setting
// not recorded yet is, with record (a daemon starting), recorded as this
// process's, by `by`; without (an operator command), left unrecorded.
func CheckShared(ctx context.Context, pool *pgxpool.Pool, by string, settings []SharedSetting, record bool) error {
	q := dbsqlc.New(pool)
	recorded := map[string]dbsqlc.SharedSetting{}
	rows, err := q.SharedSettings(ctx)
	if err != nil {
		return fmt.Errorf("read the shared settings: %w", err)
	}
	for _, r := range rows {
		recorded[r.Name] = r
	}
	for _, s := range settings {
		r, ok := recorded[s.Name]
		if !ok && record {
			if r, err = recordShared(ctx, q, s, by); err != nil {
				return err
			}
			ok = true
		}
		if ok && r.Value != s.Value {
			return &SettingMismatch{Setting: s, Recorded: r.Value, RecordedAt: r.RecordedAt, RecordedBy: r.RecordedBy}
		}
	}
	return nil
}

// recordShared records s unless another process did first, and returns the
// one recorded.
func recordShared(ctx context.Context, q *dbsqlc.Queries, s SharedSetting, by string) (dbsqlc.SharedSetting, error) {
	// Two tries: a row another process inserted after this statement's
	// snapshot is seen by the next one.
	for range 2 {
		rows, err := q.RecordSharedSetting(ctx, dbsqlc.RecordSharedSettingParams{Name: s.Name, Value: s.Value, RecordedBy: by})
		if err != nil {
			return dbsqlc.SharedSetting{}, fmt.Errorf("record %s: %w", s.Env, err)
		}
		if len(rows) > 0 {
			return dbsqlc.SharedSetting{Name: s.Name, Value: rows[0].Value, RecordedAt: rows[0].RecordedAt, RecordedBy: rows[0].RecordedBy}, nil
		}
	}
	return dbsqlc.SharedSetting{}, fmt.Errorf("record %s: recorded meanwhile, and not found", s.Env)
}

// LedgerID is the package's LedgerID on the store's pool.
func (s *Store) LedgerID(ctx context.Context) (string, error) { return LedgerID(ctx, s.pool) }

// LedgerID reads this ledger's name, which every process finds or writes in
// its Redis under the key prefix.
func LedgerID(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	id, err := dbsqlc.New(pool).LedgerID(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", errors.New("shared_settings holds no ledger_id: insert one (docs/dba.md, \"Shared settings\")")
	}
	if err != nil {
		return "", fmt.Errorf("read the ledger id: %w", err)
	}
	return id, nil
}

// CheckShardsCover refuses a shard count under which unfinished envelopes
// are not on their shard: an envelope's shard is its id modulo the count it
// was created under, so a changed redis_shards (raised or lowered) strands
// their state and queued grabs where no process looks.
func CheckShardsCover(ctx context.Context, pool *pgxpool.Pool, shards int) error {
	id, err := dbsqlc.New(pool).UnfinishedOnOtherShards(ctx, int32(shards))
	if err != nil {
		return fmt.Errorf("check the envelopes' shards: %w", err)
	}
	if id != 0 {
		return fmt.Errorf("redis_shards is %d, but unfinished envelope %d (and maybe others) is on another shard than "+
			"its id modulo %d: service_settings.redis_shards was changed with envelopes live; set it back "+
			"(it never changes once envelopes exist)", shards, id, shards)
	}
	return nil
}
