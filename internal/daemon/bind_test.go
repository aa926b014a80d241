package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/config"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// bindConfig is what bind reads of a process's settings.
func bindConfig(t *testing.T, dbURL, prefix string) config.Config {
	t.Helper()
	return config.Config{DatabaseURL: dbURL, RedisURL: testenv.RedisURL(t), RedisKeyPrefix: prefix, RedisPoolSize: 4,
		IDLocation: time.UTC, OrderNoWidth: 10}
}

// connectAs connects as a daemon (record) or an operator command does.
func connectAs(t *testing.T, c config.Config, record bool) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cl, err := connect(ctx, c, 0)
	if err != nil {
		return err
	}
	defer cl.Close()
	return bind(ctx, cl, c, record)
}

// The first daemon records the settings every process must share; a later
// process started with another is refused, saying which setting, what the
// ledger holds and how to start it, a daemon or an operator command. An
// operator command records nothing.
func TestProcessesMustShareTheLedgersSettings(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.Redis(t)
	db := testenv.PostgresURL(t)
	first := bindConfig(t, db, prefix)

	operator := first
	operator.OrderNoWidth = 12
	if err := connectAs(t, operator, false); err != nil {
		t.Fatalf("an operator command before any daemon: %v", err)
	}
	if err := connectAs(t, first, true); err != nil {
		t.Fatalf("the first daemon: %v (an operator command must not have recorded its width)", err)
	}
	if err := connectAs(t, first, true); err != nil {
		t.Fatalf("a second daemon with the same settings: %v", err)
	}
	zone := first
	zone.IDLocation = time.FixedZone("Pacific/Kiritimati", 14*3600)
	otherPrefix := first
	otherPrefix.RedisKeyPrefix = prefix + "x"
	for _, c := range []struct {
		cfg    config.Config
		record bool
		env    string
	}{
		{zone, true, "ID_TIME_ZONE"}, {operator, false, "ORDER_NO_WIDTH=10"}, {otherPrefix, true, "REDIS_KEY_PREFIX=" + prefix},
	} {
		err := connectAs(t, c.cfg, c.record)
		var m *pgstore.SettingMismatch
		if !errors.Is(err, pgstore.ErrSettingDiffers) || !errors.As(err, &m) || !strings.Contains(err.Error(), c.env) {
			t.Errorf("a process with another setting (%s): %v, want refused with %s", c.env, err, c.env)
		}
	}
}

// A second database (a staging ledger) on the same Redis and key prefix is
// refused, daemon and operator command alike: it would hand out its ids
// again over the first ledger's live envelopes.
func TestAnotherLedgerOnTheSameRedisAndPrefixIsRefused(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.Redis(t)
	prod, staging := testenv.PostgresURL(t), testenv.PostgresURL(t)
	stagingPool := openPool(t, staging)
	if _, err := stagingPool.Exec(t.Context(), "UPDATE shared_settings SET value = 'staging' WHERE name = 'ledger_id'"); err != nil {
		t.Fatal(err)
	}
	if err := connectAs(t, bindConfig(t, prod, prefix), true); err != nil {
		t.Fatalf("the first ledger's daemon: %v", err)
	}
	for _, record := range []bool{true, false} {
		if err := connectAs(t, bindConfig(t, staging, prefix), record); !errors.Is(err, redisstore.ErrOtherLedger) {
			t.Errorf("another ledger's process (daemon %v) on the same Redis and prefix: %v, want ErrOtherLedger", record, err)
		}
	}
	if err := connectAs(t, bindConfig(t, staging, prefix+"s"), true); err != nil {
		t.Errorf("another ledger on a prefix of its own: %v", err)
	}
}

// A shard count changed under live envelopes (an UPDATE of redis_shards)
// would strand them where no process looks: every process refuses to start,
// naming one.
func TestAShardCountThatStrandsEnvelopesIsRefused(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.Redis(t)
	db := testenv.PostgresURL(t)
	pool := openPool(t, db)
	s := pgstore.New(pool)
	e := pgstore.Envelope{ID: 1012, Shard: 12, SenderID: "s", TotalCents: 10, Count: 1,
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := s.InsertEnvelope(t.Context(), e, 5001, []int64{10}); err != nil {
		t.Fatal(err)
	}
	if err := connectAs(t, bindConfig(t, db, prefix), true); err != nil {
		t.Fatalf("16 shards: %v", err)
	}
	if _, err := pool.Exec(t.Context(), "UPDATE service_settings SET value = 8 WHERE name = 'redis_shards'"); err != nil {
		t.Fatal(err)
	}
	if err := connectAs(t, bindConfig(t, db, prefix), false); err == nil || !strings.Contains(err.Error(), "1012") {
		t.Errorf("8 shards with envelope 1012 on shard 12: %v, want refused naming it", err)
	}
}

// openPool is a pool on the database at url, closed when the test ends.
func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
