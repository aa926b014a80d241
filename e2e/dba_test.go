package e2e_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/testenv"
)

// `flusher dba grant|revoke` with the real binary: a role a DBA created reads
// the ledger after grant and not after revoke; a role that does not exist,
// the service's own role and a missing -role are refused.
func TestDBACommands(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := testenv.PostgresURL(t)
	env := faultEnv(dbURL, testenv.RedisURL(t), testenv.Name("rp_dba_"), freeAddr(t), freeAddr(t))
	owner, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = owner.Close(context.Background()) }()

	role, roleURL := createLoginRole(t, owner, dbURL)
	if code, stdout, stderr := runOut(t, "flusher", env, "dba", "grant", "-role", role); code != 0 ||
		!strings.Contains(stdout, role) {
		t.Fatalf("dba grant: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	if err := countPacketsAs(t, roleURL); err != nil {
		t.Errorf("after dba grant the role cannot read packets: %v", err)
	}
	if code, _, stderr := runOut(t, "flusher", env, "dba", "revoke", "-role", role); code != 0 {
		t.Fatalf("dba revoke: exit %d, stderr %s", code, stderr)
	}
	if err := countPacketsAs(t, roleURL); err == nil || !strings.Contains(err.Error(), "42501") {
		t.Errorf("after dba revoke the role reads packets, or fails otherwise: %v", err)
	}

	var me string
	if err := owner.QueryRow(ctx, "SELECT current_user").Scan(&me); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"dba", "grant", "-role", "rp_no_such_role"}, 1, "no such role"},
		{[]string{"dba", "revoke", "-role", me}, 1, "refused"},
		{[]string{"dba", "grant"}, 2, "needs -role"},
		{[]string{"dba", "grant", "-role", role, "now"}, 2, "unexpected argument"},
	} {
		if code, stdout, stderr := runOut(t, "flusher", env, c.args...); code != c.code || stdout != "" ||
			!strings.Contains(stderr, c.says) {
			t.Errorf("flusher %q: exit %d, stdout %q, stderr %s; want %d saying %q", c.args, code, stdout, stderr, c.code, c.says)
		}
	}
}

// createLoginRole creates a login role of the test's own, dropped with what
// it owns when the test ends, and returns its name and dbURL with it as the
// user.
func createLoginRole(t *testing.T, owner *pgx.Conn, dbURL string) (role, roleURL string) {
	t.Helper()
	role = testenv.Name("rp_dba_")
	if _, err := owner.Exec(t.Context(), "CREATE ROLE "+role+" LOGIN PASSWORD 'pw'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dbURL)
		if err != nil {
			return
		}
		defer func() { _ = c.Close(context.Background()) }()
		_, _ = c.Exec(context.Background(), "DROP OWNED BY "+role)
		_, _ = c.Exec(context.Background(), "DROP ROLE "+role)
	})
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, "pw")
	return role, u.String()
}

// countPacketsAs counts the packets connected as roleURL's user, and
// returns the query's error.
func countPacketsAs(t *testing.T, roleURL string) error {
	t.Helper()
	cctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := pgx.Connect(cctx, roleURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	var n int64
	return c.QueryRow(cctx, "SELECT count(*) FROM packets").Scan(&n)
}
