package apikey_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"redpacket/internal/apikey"
	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/testenv"
)

var errDown = errors.New("postgres is down (test)")

// countingDB counts the statements sent through it and fails them while down.
type countingDB struct {
	dbsqlc.DBTX
	n     atomic.Int64 // statements
	execs atomic.Int64 // of which writes
	down  atomic.Bool
}

func (c *countingDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c.n.Add(1)
	if c.down.Load() {
		return nil, errDown
	}
	return c.DBTX.Query(ctx, sql, args...)
}

func (c *countingDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.n.Add(1)
	c.execs.Add(1)
	if c.down.Load() {
		return pgconn.CommandTag{}, errDown
	}
	return c.DBTX.Exec(ctx, sql, args...)
}

func mustCreate(t *testing.T, db dbsqlc.DBTX, name, scopes string) string {
	t.Helper()
	s, err := apikey.ParseScopes(scopes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := apikey.Create(t.Context(), db, name, "", s)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return key
}

// eventually polls cond every 20 ms until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func TestCreateListRevoke(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	k1 := mustCreate(t, pool, "shop", "create,grab")
	mustCreate(t, pool, "reporting", "read,events")
	if _, err := apikey.Create(ctx, pool, "shop", "", apikey.Scopes(apikey.ScopeRead)); !errors.Is(err, apikey.ErrNameTaken) {
		t.Errorf("a second active key named shop: %v, want ErrNameTaken", err)
	}
	for _, bad := range []string{"", "two words", strings.Repeat("n", 65), "naïve"} {
		if _, err := apikey.Create(ctx, pool, bad, "", apikey.Scopes(apikey.ScopeRead)); !errors.Is(err, apikey.ErrMalformed) {
			t.Errorf("name %q: %v, want ErrMalformed", bad, err)
		}
	}
	if _, err := apikey.Create(ctx, pool, "none", "", 0); !errors.Is(err, apikey.ErrMalformed) {
		t.Errorf("no scope: %v, want ErrMalformed", err)
	}
	list, err := apikey.List(ctx, pool, false)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := json.Marshal(list)
	if len(list) != 2 || list[0].Name != "reporting" || list[1].Name != "shop" ||
		strings.Join(list[1].Scopes, ",") != "create,grab" || list[1].LastUsedAt != nil || list[1].RevokedAt != nil {
		t.Errorf("list: %s", text)
	}
	if strings.Contains(string(text), apikey.Prefix) || strings.Contains(string(text), k1[len(apikey.Prefix):]) {
		t.Errorf("the list shows key material: %s", text)
	}
	if err := apikey.Revoke(ctx, pool, "shop"); err != nil {
		t.Fatal(err)
	}
	if err := apikey.Revoke(ctx, pool, "shop"); !errors.Is(err, apikey.ErrNoSuchKey) {
		t.Errorf("revoke twice: %v, want ErrNoSuchKey", err)
	}
	// The name is free again; the revoked key stays on record.
	mustCreate(t, pool, "shop", "grab")
	list, _ = apikey.List(ctx, pool, false)
	all, _ := apikey.List(ctx, pool, true)
	if len(list) != 2 || len(all) != 3 {
		t.Fatalf("after revoking and remaking shop: %d active, %d in all; want 2 and 3", len(list), len(all))
	}
	revoked := 0
	for _, k := range all {
		if k.RevokedAt != nil {
			revoked++
		}
	}
	if revoked != 1 {
		t.Errorf("%d revoked keys listed, want 1", revoked)
	}
}

// Two keys are active at once (a client rotating); once the old one is
// revoked a running keyring refuses it within its refresh, the new one
// still passing, and no restart needed.
func TestKeyringRotationAndRevocation(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	oldKey := mustCreate(t, pool, "shop-2026-10", "grab")
	kr, err := apikey.Open(t.Context(), pool, apikey.Options{RefreshEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { _ = kr.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-kr.Done() })

	if k, ok := kr.Lookup(oldKey); !ok || k.Name != "shop-2026-10" || !k.Scopes.Has(apikey.ScopeGrab) || k.Scopes.Has(apikey.ScopeRead) {
		t.Fatalf("the old key: %+v %v", k, ok)
	}
	newKey := mustCreate(t, pool, "shop-2026-11", "grab,read")
	eventually(t, 5*time.Second, "a new key is taken", func() bool { _, ok := kr.Lookup(newKey); return ok })
	if _, ok := kr.Lookup(oldKey); !ok {
		t.Fatal("the old key stopped passing before it was revoked")
	}
	if err := apikey.Revoke(t.Context(), pool, "shop-2026-10"); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, 5*time.Second, "the revoked key is refused", func() bool { _, ok := kr.Lookup(oldKey); return !ok })
	t.Logf("revocation seen after %s", took)
	if k, ok := kr.Lookup(newKey); !ok || k.Name != "shop-2026-11" {
		t.Errorf("the new key after the old one's revocation: %+v %v", k, ok)
	}
}

// Checking keys reads no database, whatever is sent: a client trying
// random keys (or a busy one) adds no query. While PostgreSQL cannot be read,
// the keys read last stay in use.
func TestKeyringAsksNothingPerRequest(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	key := mustCreate(t, pool, "shop", "grab")
	db := &countingDB{DBTX: pool}
	kr, err := apikey.Open(t.Context(), db, apikey.Options{RefreshEvery: time.Hour, TouchEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	before := db.n.Load()
	for i := range 10_000 {
		forged := key[:len(key)-6] + strings.Repeat(string(rune('A'+i%26)), 6)
		for _, tok := range []string{key, forged, "rpk_" + strings.Repeat("x", i%60), "not-a-key"} {
			_, ok := kr.Lookup(tok)
			if ok != (tok == key) {
				t.Fatalf("Lookup(%q) = %v", tok, ok)
			}
		}
	}
	if n := db.n.Load() - before; n != 0 {
		t.Errorf("40,000 checks sent %d statements, want 0", n)
	}
}

// While PostgreSQL cannot be read, the keys read last stay in use (grabs go
// on without PostgreSQL); a grabber cannot start without reading them.
func TestKeyringKeepsKeysWhilePostgresIsDown(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	key := mustCreate(t, pool, "shop", "grab")
	db := &countingDB{DBTX: pool}
	kr, err := apikey.Open(t.Context(), db, apikey.Options{RefreshEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { _ = kr.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-kr.Done() })
	db.down.Store(true)
	n := db.n.Load()
	eventually(t, 5*time.Second, "refreshes tried while down", func() bool { return db.n.Load() > n+3 })
	if _, ok := kr.Lookup(key); !ok {
		t.Error("the key was dropped while PostgreSQL could not be read")
	}
	if failing, err := apikey.Open(t.Context(), db, apikey.Options{}); err == nil || failing != nil {
		t.Errorf("Open while PostgreSQL is down: %v, want an error", err)
	}
}

// last_used_at is written off the request path, once per TouchEvery at most,
// for the keys used meanwhile (a key revoked after use included).
func TestKeyringRecordsLastUse(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	used := mustCreate(t, pool, "used", "grab")
	mustCreate(t, pool, "idle", "grab")
	gone := mustCreate(t, pool, "gone", "grab")
	db := &countingDB{DBTX: pool}
	kr, err := apikey.Open(t.Context(), db, apikey.Options{RefreshEvery: 20 * time.Millisecond, TouchEvery: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { _ = kr.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-kr.Done() })
	if _, ok := kr.Lookup(gone); !ok {
		t.Fatal("gone: not active")
	}
	if err := apikey.Revoke(t.Context(), pool, "gone"); err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if _, ok := kr.Lookup(used); !ok {
			t.Fatal("used: not active")
		}
	}
	lastUse := func(name string) *time.Time {
		all, err := apikey.List(t.Context(), pool, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range all {
			if k.Name == name {
				return k.LastUsedAt
			}
		}
		t.Fatalf("no key %s", name)
		return nil
	}
	eventually(t, 5*time.Second, "last use recorded", func() bool { return lastUse("used") != nil && lastUse("gone") != nil })
	if lastUse("idle") != nil {
		t.Error("a key never used has a last use")
	}
	// 1,000 uses and more, a write per TouchEvery at most: the writes
	// follow the clock, not the traffic.
	start, before := time.Now(), db.execs.Load()
	for time.Since(start) < time.Second {
		kr.Lookup(used)
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-kr.Done()
	if n, most := db.execs.Load()-before, int64(time.Since(start)/(300*time.Millisecond))+2; n > most {
		t.Errorf("%d writes of last use, want at most %d (one per 300 ms, and one at the end)", n, most)
	}
}

// A key's client is its name unless given; a key made by the version
// before, which writes no client, belongs to its name's client; a bad
// client is refused.
func TestKeyClients(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	mustCreate(t, pool, "shop", "create")
	if _, err := apikey.Create(ctx, pool, "shop-2026-12", "shop", apikey.Scopes(apikey.ScopeCreate)); err != nil {
		t.Fatal(err)
	}
	if _, err := apikey.Create(ctx, pool, "x", "two words", apikey.Scopes(apikey.ScopeCreate)); !errors.Is(err, apikey.ErrMalformed) {
		t.Errorf("client %q: %v, want ErrMalformed", "two words", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO api_keys (name, key_hash, scopes) VALUES ('older', sha256('k'::bytea), '{read}')`); err != nil {
		t.Fatal(err)
	}
	list, err := apikey.List(ctx, pool, false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, k := range list {
		got[k.Name] = k.Client
	}
	if want := map[string]string{"shop": "shop", "shop-2026-12": "shop", "older": "older"}; !maps.Equal(got, want) {
		t.Errorf("clients %v, want %v", got, want)
	}
}

// last_used_at is when the key was used, not when a grabber wrote it: a
// key used, then revoked while PostgreSQL could not be written, does not
// show a use after its revocation once the write goes through.
func TestKeyringRecordsTheTimeOfUseNotOfTheWrite(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	key := mustCreate(t, pool, "leaked", "grab")
	db := &countingDB{DBTX: pool}
	kr, err := apikey.Open(t.Context(), db, apikey.Options{RefreshEvery: time.Hour, TouchEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { _ = kr.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-kr.Done() })
	db.down.Store(true)
	before := time.Now()
	if _, ok := kr.Lookup(key); !ok {
		t.Fatal("the key is not active")
	}
	after := time.Now()
	n := db.n.Load()
	eventually(t, 5*time.Second, "writes of the last use tried while down", func() bool { return db.n.Load() > n+3 })
	if err := apikey.Revoke(t.Context(), pool, "leaked"); err != nil { // through the pool: PostgreSQL is up for the operator
		t.Fatal(err)
	}
	db.down.Store(false)
	var got apikey.Listed
	eventually(t, 5*time.Second, "last use recorded", func() bool {
		all, err := apikey.List(t.Context(), pool, true)
		if err != nil {
			t.Fatal(err)
		}
		got = all[0]
		return got.LastUsedAt != nil
	})
	if got.LastUsedAt.Before(before.Add(-time.Second)) || got.LastUsedAt.After(after) || !got.LastUsedAt.Before(*got.RevokedAt) {
		t.Errorf("last used at %v, revoked at %v; the one use was between %v and %v",
			got.LastUsedAt, got.RevokedAt, before, after)
	}
}

// A use after Run stopped (a request a stopping grabber still answers) is
// written by Flush.
func TestKeyringFlushWritesUsesAfterRun(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	key := mustCreate(t, pool, "late", "grab")
	kr, err := apikey.Open(t.Context(), pool, apikey.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { _ = kr.Run(ctx) }()
	cancel()
	<-kr.Done()
	if _, ok := kr.Lookup(key); !ok {
		t.Fatal("the key is not active")
	}
	if err := kr.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	all, err := apikey.List(t.Context(), pool, false)
	if err != nil {
		t.Fatal(err)
	}
	if all[0].LastUsedAt == nil {
		t.Error("the use after Run stopped was not written")
	}
}
