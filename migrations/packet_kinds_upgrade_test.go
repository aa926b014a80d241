package migrations_test

import (
	"strings"
	"testing"
)

// Migration 13 adds its columns to envelopes without rewriting the table
// (the relation keeps its file): a rewrite holds every read and write of
// envelopes for the time of copying it. Envelopes already there are of the
// random kind, and the kind's constraint holds from then on.
func TestPacketKindsRewriteNoEnvelope(t *testing.T) {
	t.Parallel()
	m, dbURL := downTo(t, 12)
	c := connect(t, dbURL)
	ctx := t.Context()
	if _, err := c.Exec(ctx, `
		INSERT INTO envelopes (id, shard, sender_id, total_cents, count, status, expires_at)
		SELECT g, g % 4, 's', 100, 2, 'open', now() + interval '1 day' FROM generate_series(1, 500) g`); err != nil {
		t.Fatal(err)
	}
	filenode := func() int64 {
		t.Helper()
		var n int64
		if err := c.QueryRow(ctx, `SELECT pg_relation_filenode('envelopes')::bigint`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := filenode()
	if err := m.Steps(1); err != nil {
		t.Fatalf("up to 13: %v", err)
	}
	if v, dirty := version(t, dbURL); v != 13 || dirty {
		t.Fatalf("schema_migrations = %d dirty=%v, want 13 clean", v, dirty)
	}
	if after := filenode(); after != before {
		t.Errorf("migration 13 rewrote envelopes: filenode %d before, %d after", before, after)
	}
	var random int64
	if err := c.QueryRow(ctx, `SELECT count(*) FROM envelopes WHERE kind = 'random'`).Scan(&random); err != nil || random != 500 {
		t.Errorf("envelopes of the random kind after the upgrade: %d, %v; want 500", random, err)
	}
	_, err := c.Exec(ctx, `UPDATE envelopes SET kind = 'even' WHERE id = 1`)
	if err == nil || !strings.Contains(err.Error(), "envelope_kind_check") {
		t.Errorf("a kind outside random and fixed: %v, want envelope_kind_check refusing it", err)
	}
}
