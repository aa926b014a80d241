package migrations_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Migration 19 keeps a user to one packet per envelope with one index where
// there were two: the claims stay, a user's second packet of an envelope is
// still refused (now by claims_user_envelope_key), a user's history reads
// that index, and going back down restores both indexes of migration 16.
func TestUserClaimsKeyKeepsOnePacketPerUser(t *testing.T) {
	t.Parallel()
	m, dbURL := downTo(t, 18)
	c := connect(t, dbURL)
	ctx := t.Context()
	insert := `INSERT INTO claims (envelope_id, packet_id, user_id, amount_cents, claimed_at, order_no)
		VALUES ($1, $2, $3, 5, now(), $4)`
	for _, r := range [][]any{{1, 100, "a", "o1"}, {1, 101, "b", "o2"}, {2, 200, "a", "o3"}} {
		if _, err := c.Exec(ctx, insert, r...); err != nil {
			t.Fatalf("seed %v: %v", r, err)
		}
	}
	if err := m.Up(); err != nil {
		t.Fatalf("up: %v", err)
	}
	if n := strings.Join(queryStrings(t, c, `SELECT count(*)::text FROM claims`), ""); n != "3" {
		t.Errorf("claims after the upgrade: %s, want 3", n)
	}
	_, err := c.Exec(ctx, insert, 1, 102, "a", "o4")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" || pgErr.ConstraintName != "claims_user_envelope_key" {
		t.Errorf("a's second packet of envelope 1: %v; want a unique violation of claims_user_envelope_key", err)
	}
	// A history page is one range of the index, in its order (no sort);
	// the table is tiny, so a sequential scan is ruled out to see the plan.
	if _, err := c.Exec(ctx, `SET enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(queryStrings(t, c, `EXPLAIN (COSTS OFF) SELECT envelope_id FROM claims
		WHERE user_id = 'a' AND envelope_id < 9 ORDER BY envelope_id DESC LIMIT 100`), "\n")
	if !strings.Contains(plan, "Index Only Scan Backward using claims_user_envelope_key") || strings.Contains(plan, "Sort") {
		t.Errorf("a user's history page is not one backward range of claims_user_envelope_key:\n%s", plan)
	}
	if err := m.Migrate(18); err != nil {
		t.Fatalf("down: %v", err)
	}
	if idx := strings.Join(queryStrings(t, c, `SELECT indexname::text FROM pg_indexes WHERE tablename = 'claims'
		AND indexname IN ('claims_envelope_user_key', 'claims_user_idx', 'claims_user_envelope_key') ORDER BY 1`), ","); idx != "claims_envelope_user_key,claims_user_idx" {
		t.Errorf("indexes after going down: %s", idx)
	}
}

// An index a DBA built beforehand (CONCURRENTLY, so the flusher kept
// writing) is adopted, not built again; one whose concurrent build failed,
// or one of another shape under that name, stops the migration with what to
// do.
func TestUserClaimsKeyAdoptsAnIndexBuiltBeforehand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ index, refused string }{
		{`CREATE UNIQUE INDEX CONCURRENTLY claims_user_envelope_key ON claims (user_id, envelope_id)`, ""},
		{`CREATE UNIQUE INDEX CONCURRENTLY claims_user_envelope_key ON claims (user_id, envelope_id)`, "invalid"},
		{`CREATE UNIQUE INDEX CONCURRENTLY claims_user_envelope_key ON claims (envelope_id, user_id)`, "is not UNIQUE ON claims (user_id, envelope_id)"},
		{`CREATE INDEX CONCURRENTLY claims_user_envelope_key ON claims (user_id, envelope_id)`, "is not UNIQUE ON claims (user_id, envelope_id)"},
	} {
		m, dbURL := downTo(t, 18)
		conn := connect(t, dbURL)
		ctx := t.Context()
		if _, err := conn.Exec(ctx, c.index); err != nil {
			t.Fatal(err)
		}
		var oid uint32
		if err := conn.QueryRow(ctx, `SELECT 'claims_user_envelope_key'::regclass::oid`).Scan(&oid); err != nil {
			t.Fatal(err)
		}
		if c.refused == "invalid" {
			if _, err := conn.Exec(ctx, `UPDATE pg_index SET indisvalid = false WHERE indexrelid = $1`, oid); err != nil {
				t.Fatal(err)
			}
		}
		if c.refused != "" {
			if err := m.Up(); err == nil || !strings.Contains(err.Error(), c.refused) || !strings.Contains(err.Error(), "drop it and migrate again") {
				t.Errorf("up over %s (%s): %v; want the migration stopped with what to do", c.index, c.refused, err)
			}
			// Nothing changed; docs/dba.md's way out works.
			if kept := strings.Join(queryStrings(t, conn, `SELECT conname::text FROM pg_constraint
				WHERE conname = 'claims_envelope_user_key'`), ""); kept == "" {
				t.Errorf("a stopped migration 19 dropped claims_envelope_user_key")
			}
			for _, q := range []string{`DROP INDEX CONCURRENTLY claims_user_envelope_key`,
				`UPDATE schema_migrations SET version = 18, dirty = false`} {
				if _, err := conn.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			oid = 0
		}
		if err := m.Up(); err != nil {
			t.Fatalf("up: %v", err)
		}
		var adopted uint32
		if err := conn.QueryRow(ctx, `SELECT conindid FROM pg_constraint WHERE conname = 'claims_user_envelope_key'`).Scan(&adopted); err != nil || oid != 0 && adopted != oid {
			t.Errorf("constraint's index %d, %v; want the one built beforehand, %d", adopted, err, oid)
		}
	}
}
