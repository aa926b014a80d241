package migrations_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/testenv"
)

// After migration 18 a run's packets are stored lz4-compressed, or, on a
// server built without lz4, uncompressed: never with pglz, which cost the
// flusher more than the rest of the run's insert.
func TestClaimRunsAreNotCompressedWithPglz(t *testing.T) {
	t.Parallel()
	dbURL := testenv.PostgresURL(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var method *string
	var storage string
	// Read back, not RETURNING: that is the row before it was stored.
	if _, err := pool.Exec(t.Context(), `
		INSERT INTO claim_event_runs (first_position, last_position, envelope_id, packet_ids, delivered_through)
		SELECT 1, 2000, 1, array_agg(g::bigint ORDER BY g), 0 FROM generate_series(1000001, 1002000) g`); err != nil {
		t.Fatal(err)
	}
	err = pool.QueryRow(t.Context(), `
		SELECT pg_column_compression(packet_ids),
		       (SELECT attstorage::text FROM pg_attribute
		        WHERE attrelid = 'claim_event_runs'::regclass AND attname = 'packet_ids')
		FROM claim_event_runs WHERE first_position = 1`).Scan(&method, &storage)
	if err != nil {
		t.Fatal(err)
	}
	lz4 := method != nil && *method == "lz4"
	external := method == nil && storage == "e"
	if !lz4 && !external {
		t.Errorf("a run's packet_ids: compression %v, storage %q; want lz4, or uncompressed (storage e)", deref(method), storage)
	}
}

func deref(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}
