package migrations_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"strings"
	"testing"

	"redpacket/migrations"
)

// A migration that has landed may have run on a database already: editing
// it would leave such a database with the old text and every other with
// the new, and its down file would then fail on one of them. landed.sha256
// holds every migration file's SHA-256 (`sha256sum *.sql` in this
// directory); a change goes into a new migration. A new file's line is
// added with it.
func TestLandedMigrationsAreNeverEdited(t *testing.T) {
	t.Parallel()
	f, err := os.Open("landed.sha256")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("landed.sha256: %q is not `<sha256>  <file>`", sc.Text())
		}
		want[name] = sum
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		b, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		switch got, listed := hex.EncodeToString(sum[:]), want[name]; {
		case listed == "":
			t.Errorf("%s is not in landed.sha256: add `sha256sum %s` with it", name, name)
		case got != listed:
			t.Errorf("%s changed since it landed (sha256 %s, landed as %s): write a new migration instead", name, got, listed)
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("landed.sha256 lists %s, which is gone: a landed migration is never removed", name)
	}
}
