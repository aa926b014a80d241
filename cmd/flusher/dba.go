package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/dbadmin"
)

// dbaSynopsis is the flags of the dba commands, as their usage shows them.
const dbaSynopsis = "-role NAME"

// runDBAGrant is `flusher dba grant -role NAME`: an existing role may read
// every table and view, and the tables later migrations add.
func runDBAGrant(args []string) error {
	return runDBA("grant", args, dbadmin.Grant, grantedMessage)
}

// runDBARevoke is `flusher dba revoke -role NAME`. REVOKE takes back the
// grants dba grant made to the role itself: a role that belongs to a group
// granted read access (docs/dba.md: ledger_readers), or was granted SELECT
// by a DBA, reads on, and the operator is told so.
func runDBARevoke(args []string) error {
	revoke := func(ctx context.Context, db dbsqlc.DBTX, role string) error {
		if err := dbadmin.Revoke(ctx, db, role); err != nil {
			return err
		}
		reads, err := dbadmin.StillReads(ctx, db, role)
		if err != nil {
			return err
		}
		if reads {
			fmt.Fprintf(os.Stderr, "warning: role %q still reads the tables, through other grants or a role it belongs to\n", role)
		}
		return nil
	}
	return runDBA("revoke", args, revoke, revokedMessage)
}

func grantedMessage(role string) string {
	return fmt.Sprintf("role %q may read every table and view, and the tables later migrations add\n", role)
}

// revokedMessage says what revoke did, and only that (see runDBARevoke).
func revokedMessage(role string) string {
	return fmt.Sprintf("the grants of dba grant to role %q are revoked (SELECT on every table and view, "+
		"USAGE on the schema, the default privileges for later tables); other grants stay\n", role)
}

func runDBA(verb string, args []string, act func(context.Context, dbsqlc.DBTX, string) error, done func(role string) string) error {
	fs := flag.NewFlagSet("dba "+verb, flag.ContinueOnError)
	role := fs.String("role", "", "the existing role (made with CREATE ROLE, docs/dba.md)")
	if err := parseFlags(fs, dbaSynopsis, args); err != nil {
		return helpIsDone(err)
	}
	if *role == "" {
		fmt.Fprintf(os.Stderr, "flusher dba %s: needs -role\n", verb)
		fmt.Fprintf(os.Stderr, "usage: flusher dba %s %s\n", verb, dbaSynopsis)
		return errUsage
	}
	ctx, db, closeDB, err := keysDB()
	if err != nil {
		return err
	}
	defer closeDB()
	if err := act(ctx, db, *role); err != nil {
		return err // exit 1; a role refused says why (dbadmin.ErrNoSuchRole, ErrOwnRole)
	}
	fmt.Print(done(*role))
	return nil
}
