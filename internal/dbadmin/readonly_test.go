package dbadmin_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/dbadmin"
	"redpacket/internal/testenv"
)

// A granted role reads every table and view, those a later migration adds
// too, and writes nothing; revoked, it reads nothing, later tables included.
func TestGrantReadsEverythingWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	o := newOwner(t)
	role := testenv.Name("rp_ro_")
	ro := o.newRole(role)
	o.exec(`INSERT INTO claim_conflicts (envelope_id, packet_id, user_id, claimed_at, reason)
		VALUES (1, 2, 'u', now(), 'unknown_packet')`)

	if err := read(ctx, ro, "packets"); !denied(err) {
		t.Fatalf("a new role reads packets before any grant: %v", err)
	}
	if err := dbadmin.Grant(ctx, o.pool, role); err != nil {
		t.Fatal(err)
	}
	rels := o.relations()
	for rel := range rels {
		if err := read(ctx, ro, rel); err != nil {
			t.Errorf("granted role cannot read %s: %v", rel, err)
		}
	}
	checkGrantedWritesNothing(t, o, ro, rels)

	// A later migration, run as the owner, adds a table and a view.
	checkGrantedReadsLaterRelations(t, o, ro)

	if err := dbadmin.Revoke(ctx, o.pool, role); err != nil {
		t.Fatal(err)
	}
	o.exec("CREATE TABLE after_revoke (id bigint)")
	for rel := range o.relations() {
		if err := read(ctx, ro, rel); !denied(err) {
			t.Errorf("revoked role: read %s: %v; want permission denied", rel, err)
		}
	}
	// Granting again after a revoke works, and revoking twice is harmless.
	if err := dbadmin.Grant(ctx, o.pool, role); err != nil {
		t.Fatal(err)
	}
	if err := read(ctx, ro, "after_revoke"); err != nil {
		t.Errorf("granted again, cannot read after_revoke: %v", err)
	}
	for range 2 {
		if err := dbadmin.Revoke(ctx, o.pool, role); err != nil {
			t.Fatal(err)
		}
	}
}

// checkGrantedWritesNothing: the granted role ro can neither change a row of
// any table in rels nor call the functions and DDL kept for the owner, and
// the one claim conflict is still there.
func checkGrantedWritesNothing(t *testing.T, o *owner, ro *pgx.Conn, rels map[string]string) {
	t.Helper()
	ctx := t.Context()
	for rel, kind := range rels {
		if kind != "r" && kind != "p" {
			continue
		}
		col := pgx.Identifier{o.firstColumn(rel)}.Sanitize()
		name := pgx.Identifier{rel}.Sanitize()
		for _, stmt := range []string{
			"INSERT INTO " + name + " DEFAULT VALUES",
			"UPDATE " + name + " SET " + col + " = " + col,
			"DELETE FROM " + name,
			"TRUNCATE " + name,
		} {
			if _, err := ro.Exec(ctx, stmt); !denied(err) {
				t.Errorf("granted role: %s: %v; want permission denied", stmt, err)
			}
		}
	}
	for _, stmt := range []string{
		"SELECT take_event_ids(1)",
		"CREATE TABLE mine (id int)",
		"SELECT dba_grant_read(current_user)",
	} {
		if _, err := ro.Exec(ctx, stmt); !denied(err) {
			t.Errorf("granted role: %s: %v; want permission denied", stmt, err)
		}
	}
	var rows int
	if err := ro.QueryRow(ctx, "SELECT count(*) FROM claim_conflicts").Scan(&rows); err != nil || rows != 1 {
		t.Errorf("granted role counts %d claim conflicts (%v); want 1: writes were refused", rows, err)
	}
}

// checkGrantedReadsLaterRelations: a table and a view the owner adds after
// the grant are readable by ro, and the table is not writable.
func checkGrantedReadsLaterRelations(t *testing.T, o *owner, ro *pgx.Conn) {
	t.Helper()
	ctx := t.Context()
	o.exec("CREATE TABLE later_ledger (id bigint PRIMARY KEY)")
	o.exec("INSERT INTO later_ledger VALUES (7)")
	o.exec("CREATE VIEW later_view AS SELECT id FROM later_ledger")
	for _, rel := range []string{"later_ledger", "later_view"} {
		var id int64
		if err := ro.QueryRow(ctx, "SELECT id FROM "+rel).Scan(&id); err != nil || id != 7 {
			t.Errorf("granted role reads %d from %s added later (%v); want 7", id, rel, err)
		}
	}
	if _, err := ro.Exec(ctx, "INSERT INTO later_ledger VALUES (8)"); !denied(err) {
		t.Errorf("granted role writes into a table added later: %v", err)
	}
}

// Roles that must not be granted or revoked are refused, and a role name is
// an identifier however it is spelled.
func TestGrantRefusals(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	o := newOwner(t)

	var me string
	if err := o.pool.QueryRow(ctx, "SELECT current_user").Scan(&me); err != nil {
		t.Fatal(err)
	}
	tableOwner := testenv.Name("rp_owner_")
	o.newRole(tableOwner)
	o.exec("CREATE TABLE owned_elsewhere (id int)")
	o.exec("ALTER TABLE owned_elsewhere OWNER TO " + pgx.Identifier{tableOwner}.Sanitize())
	group := testenv.Name("rp_group_")
	o.newRole(group)
	o.exec("GRANT " + pgx.Identifier{group}.Sanitize() + " TO CURRENT_USER")

	for _, c := range []struct {
		role string
		want error
	}{
		{"rp_no_such_role_" + testenv.Name(""), dbadmin.ErrNoSuchRole},
		{"public", dbadmin.ErrNoSuchRole},
		{"", dbadmin.ErrNoSuchRole},
		{me, dbadmin.ErrOwnRole},
		{tableOwner, dbadmin.ErrOwnRole},
		{group, dbadmin.ErrOwnRole},
	} {
		for _, act := range []func() error{
			func() error { return dbadmin.Grant(ctx, o.pool, c.role) },
			func() error { return dbadmin.Revoke(ctx, o.pool, c.role) },
		} {
			if err := act(); !errors.Is(err, c.want) {
				t.Errorf("role %q: %v; want %v", c.role, err, c.want)
			}
		}
	}
	// The owner still reads and writes everything: nothing was revoked.
	o.exec("INSERT INTO service_settings (name, value) VALUES ('after_refusals', 1)")

	// A name with quotes, spaces and a statement in it is one role.
	odd := testenv.Name(`ro "x"; DROP TABLE packets; -- `)
	ro := o.newRole(odd)
	if err := dbadmin.Grant(ctx, o.pool, odd); err != nil {
		t.Fatal(err)
	}
	if err := read(ctx, ro, "packets"); err != nil {
		t.Errorf("role %q cannot read packets: %v", odd, err)
	}
}

// firstColumn names a relation's first column that may be assigned.
func (o *owner) firstColumn(rel string) string {
	o.t.Helper()
	var col string
	err := o.pool.QueryRow(o.t.Context(), `SELECT attname FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped
		  AND attidentity = '' AND attgenerated = '' ORDER BY attnum LIMIT 1`,
		pgx.Identifier{rel}.Sanitize()).Scan(&col)
	if err != nil {
		o.t.Fatal(err)
	}
	return col
}
