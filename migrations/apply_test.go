package migrations_test

import (
	"testing"

	"redpacket/internal/testenv"
	"redpacket/migrations"
)

// Apply says what it applied: every migration, by version and name, on an
// empty database; nothing the second time.
func TestApplyReportsWhatItApplied(t *testing.T) {
	t.Parallel()
	url := testenv.EmptyPostgresURL(t)
	applied, err := migrations.Apply(url)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != migrations.Version {
		t.Fatalf("applied %v on an empty database, want versions 1 to %d", applied, migrations.Version)
	}
	for i, m := range applied {
		if m.Version != i+1 || m.Name == "" {
			t.Errorf("applied[%d] = %+v, want version %d with its name", i, m, i+1)
		}
	}
	if applied[0].String() != "000001_core" {
		t.Errorf("first applied %q, want 000001_core", applied[0])
	}
	again, err := migrations.Apply(url)
	if err != nil || len(again) != 0 {
		t.Fatalf("second Apply = %v, %v; want nothing applied", again, err)
	}
}
