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

// connectAs connects as daemon uses does (record), or as an operator
// command does (not record).
func connectAs(t *testing.T, c config.Config, uses config.Daemon, record bool) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cl, err := connect(ctx, c, 0)
	if err != nil {
		return err
	}
	defer cl.Close()
	return bind(ctx, cl, c, uses, record)
}

// The first daemon records the settings every process must share; a later
// process started with another it uses is refused, saying which setting,
// what the ledger holds and how to start it, a daemon or an operator
// command. An operator command records nothing, and a flusher compares only
// what it uses (the prefix).
func TestProcessesMustShareTheLedgersSettings(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.Redis(t)
	db := testenv.PostgresURL(t)
	first := bindConfig(t, db, prefix)
	otherPrefix := first
	otherPrefix.RedisKeyPrefix = prefix + "x"
	zone := first
	zone.IDLocation = time.FixedZone("Pacific/Kiritimati", 14*3600)
	width := first
	width.OrderNoWidth = 12

	if err := connectAs(t, otherPrefix, config.Flusher, false); err != nil {
		t.Fatalf("an operator command before any daemon: %v", err)
	}
	if err := connectAs(t, first, config.Grabber, true); err != nil {
		t.Fatalf("the first grabber: %v (an operator command must not have recorded its prefix)", err)
	}
	for _, c := range []struct {
		what   string
		cfg    config.Config
		uses   config.Daemon
		record bool
		env    string // in the refusal; "" for none
	}{
		{"a second grabber with the same settings", first, config.Grabber, true, ""},
		{"a flusher with another ORDER_NO_WIDTH, which it does not use", width, config.Flusher, true, ""},
		{"a grabber with another ID_TIME_ZONE", zone, config.Grabber, true, "ID_TIME_ZONE"},
		{"a grabber with another ORDER_NO_WIDTH", width, config.Grabber, true, "ORDER_NO_WIDTH=10"},
		{"a flusher with another prefix", otherPrefix, config.Flusher, true, "REDIS_KEY_PREFIX=" + prefix},
		{"an operator command with another prefix", otherPrefix, config.Flusher, false, "REDIS_KEY_PREFIX=" + prefix},
	} {
		err := connectAs(t, c.cfg, c.uses, c.record)
		var m *pgstore.SettingMismatch
		switch {
		case c.env == "" && err != nil:
			t.Errorf("%s: %v, want it to start", c.what, err)
		case c.env != "" && (!errors.Is(err, pgstore.ErrSettingDiffers) || !errors.As(err, &m) || !strings.Contains(err.Error(), c.env)):
			t.Errorf("%s: %v, want refused with %s", c.what, err, c.env)
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
	if err := connectAs(t, bindConfig(t, prod, prefix), config.Grabber, true); err != nil {
		t.Fatalf("the first ledger's daemon: %v", err)
	}
	for _, record := range []bool{true, false} {
		if err := connectAs(t, bindConfig(t, staging, prefix), config.Flusher, record); !errors.Is(err, redisstore.ErrOtherLedger) {
			t.Errorf("another ledger's process (daemon %v) on the same Redis and prefix: %v, want ErrOtherLedger", record, err)
		}
	}
	if err := connectAs(t, bindConfig(t, staging, prefix+"s"), config.Grabber, true); err != nil {
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
	e := pgstore.Envelope{ID: 1020, Shard: 12, SenderID: "s", TotalCents: 10, Count: 1,
		CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
	if err := s.InsertEnvelope(t.Context(), e, 5001, []int64{10}); err != nil {
		t.Fatal(err)
	}
	if err := connectAs(t, bindConfig(t, db, prefix), config.Grabber, true); err != nil {
		t.Fatalf("16 shards: %v", err)
	}
	for _, n := range []int{8, 32} { // lowered, and raised
		if _, err := pool.Exec(t.Context(), "UPDATE service_settings SET value = $1 WHERE name = 'redis_shards'", n); err != nil {
			t.Fatal(err)
		}
		if err := connectAs(t, bindConfig(t, db, prefix), config.Flusher, false); err == nil || !strings.Contains(err.Error(), "1020") {
			t.Errorf("%d shards with envelope 1020 on shard 12: %v, want refused naming it", n, err)
		}
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
