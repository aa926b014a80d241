package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/testenv"
)

// stdoutOf runs f with os.Stdout going to a file, and returns what f
// wrote there.
func stdoutOf(t *testing.T, f func()) string {
	t.Helper()
	file, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	saved := os.Stdout
	os.Stdout = file
	defer func() { os.Stdout = saved }()
	f()
	b, err := os.ReadFile(file.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// `flusher dba revoke` takes back the grants dba grant made to the role
// itself; a member of a group granted read access (docs/dba.md's
// ledger_readers and alice) reads on through the group. The command says
// what it revoked, warns that the role still reads, and never says it no
// longer reads.
func TestDBARevokeDoesNotClaimTheRoleNoLongerReads(t *testing.T) {
	dbURL := testenv.PostgresURL(t)
	unreachable(t)
	t.Setenv("DATABASE_URL", dbURL)
	ctx := t.Context()
	owner, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(context.Background())
	group, member := testenv.Name("rp_readers_"), testenv.Name("rp_alice_")
	for _, role := range []string{group, member} {
		createRole(t, owner, dbURL, role)
	}
	if _, err := owner.Exec(ctx, "GRANT "+group+" TO "+member); err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{group, member} {
		stdoutOf(t, func() { err = runDBAGrant([]string{"-role", role}) })
		if err != nil {
			t.Fatalf("dba grant -role %s: %v", role, err)
		}
	}

	var out string
	warned := stderrOf(t, func() { out = stdoutOf(t, func() { err = runDBARevoke([]string{"-role", member}) }) })
	if err != nil {
		t.Fatalf("dba revoke -role %s: %v", member, err)
	}
	var reads bool
	if err := owner.QueryRow(ctx, "SELECT has_table_privilege($1, 'envelopes', 'SELECT')", member).Scan(&reads); err != nil {
		t.Fatal(err)
	}
	if !reads {
		t.Fatalf("%s no longer reads envelopes; the test wants it reading through %s", member, group)
	}
	if strings.Contains(out, "no longer reads") || !strings.Contains(out, "revoked") ||
		!strings.Contains(out, member) || !strings.Contains(out, "other grants stay") {
		t.Errorf("dba revoke said %q; %s still reads through %s: want what was revoked, and that other grants stay", out, member, group)
	}
	if !strings.Contains(warned, "warning") || !strings.Contains(warned, member) || !strings.Contains(warned, "still reads") {
		t.Errorf("dba revoke warned %q; %s still reads through %s: want a warning naming it", warned, member, group)
	}
	// The group itself, revoked, reads no more: no warning.
	warned = stderrOf(t, func() { stdoutOf(t, func() { err = runDBARevoke([]string{"-role", group}) }) })
	if err != nil || strings.Contains(warned, "warning") {
		t.Errorf("dba revoke -role %s: %v, warned %q; want no warning", group, err, warned)
	}
}

// createRole makes a role, dropped (with what it was granted in the test
// database) when the test ends: roles belong to the server, not the database.
func createRole(t *testing.T, owner *pgx.Conn, dbURL, role string) {
	t.Helper()
	if _, err := owner.Exec(t.Context(), "CREATE ROLE "+role+" NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dbURL)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP OWNED BY "+role)
		_, _ = c.Exec(context.Background(), "DROP ROLE "+role)
	})
}
