package retention

import (
	"errors"
	"testing"
	"time"

	"redpacket/internal/testenv"
	"redpacket/migrations"
)

// The manifest's schema_version is the migration the database is at when
// the rows are copied, not the running build's: a flusher of the version
// before, still running after a migration (a rolling upgrade), writes the
// newer schema's columns and says so.
func TestManifestNamesTheDatabasesSchemaVersion(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	seed(t, pool, 1, 4, "settled", now.Add(-48*time.Hour))
	newer := migrations.Version + 1
	exec(t, pool, `UPDATE schema_migrations SET version = $1`, newer)
	res, err := Run(t.Context(), pool, options(t, 24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if m := manifestOf(t, res.Set); m.SchemaVersion != newer || !m.Complete {
		t.Errorf("manifest: schema_version %d, complete %v; want %d (the database's), complete", m.SchemaVersion, m.Complete, newer)
	}
}

// A migration committed between two batches stops the run: the rows of the
// batches before are in the set, labelled with the version they were copied
// under, and the rest stay for the next run's set.
func TestMigrationDuringARunStopsIt(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	for id := int64(1); id <= 3; id++ {
		seed(t, pool, id, 4, "settled", now.Add(-48*time.Hour+time.Duration(id)*time.Minute))
	}
	o := options(t, 24*time.Hour) // two envelopes a batch
	o.afterCommit = func() { exec(t, pool, `UPDATE schema_migrations SET version = version + 1`) }
	res, err := Run(t.Context(), pool, o)
	if !errors.Is(err, ErrSchemaChanged) {
		t.Fatalf("run across a migration: %v, want ErrSchemaChanged", err)
	}
	if res.Removed.Envelopes != 2 || res.Batches != 1 {
		t.Errorf("removed %d envelopes in %d batches, want the first batch's 2", res.Removed.Envelopes, res.Batches)
	}
	m := manifestOf(t, res.Set)
	if m.SchemaVersion != migrations.Version || m.Complete || m.Envelopes != 2 {
		t.Errorf("manifest: schema_version %d, complete %v, %d envelopes; want %d, incomplete, 2",
			m.SchemaVersion, m.Complete, m.Envelopes, migrations.Version)
	}
	if left := count(t, pool, 3); left["envelopes"] != 1 || left["packets"] != 4 {
		t.Errorf("the envelope after the migration: %v, want it kept whole", left)
	}
}

// A dirty schema (a migration running, or failed half-way) has no version
// to label a set with: the run removes nothing and leaves no set.
func TestDirtySchemaRemovesNothing(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	seed(t, pool, 1, 4, "settled", now.Add(-48*time.Hour))
	exec(t, pool, `UPDATE schema_migrations SET dirty = true`)
	o := options(t, 24*time.Hour)
	res, err := Run(t.Context(), pool, o)
	if !errors.Is(err, ErrSchemaChanged) || res.Removed.Envelopes != 0 || res.Set != "" || len(sets(t, o.Dir)) != 0 {
		t.Errorf("run on a dirty schema: %+v, %v; sets %v; want ErrSchemaChanged, nothing removed, no set", res, err, sets(t, o.Dir))
	}
	if left := count(t, pool, 1); left["envelopes"] != 1 {
		t.Errorf("envelope 1: %v, want kept", left)
	}
}
