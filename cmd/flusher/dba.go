package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

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

// runDBARevoke is `flusher dba revoke -role NAME`.
func runDBARevoke(args []string) error {
	return runDBA("revoke", args, dbadmin.Revoke, revokedMessage)
}

func grantedMessage(role string) string {
	return fmt.Sprintf("role %q may read every table and view, and the tables later migrations add\n", role)
}

// revokedMessage says what revoke did, and only that: REVOKE takes back
// the grants dba grant made to the role itself, so a role that belongs to
// a group granted read access (docs/dba.md: ledger_readers), or was granted
// SELECT by a DBA, reads on. The operator is told how to check.
func revokedMessage(role string) string {
	literal := "'" + strings.ReplaceAll(role, "'", "''") + "'"
	return fmt.Sprintf("the grants of dba grant to role %q are revoked (SELECT on every table and view, "+
		"USAGE on the schema, the default privileges for later tables)\n"+
		"what was granted otherwise, to it or to a role it belongs to, stays: "+
		"SELECT has_table_privilege(%s, 'envelopes', 'SELECT') says whether it still reads the tables\n", role, literal)
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
