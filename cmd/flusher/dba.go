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
	return runDBA("grant", args, dbadmin.Grant,
		"role %q may read every table and view, and the tables later migrations add\n")
}

// runDBARevoke is `flusher dba revoke -role NAME`.
func runDBARevoke(args []string) error {
	return runDBA("revoke", args, dbadmin.Revoke,
		"role %q no longer reads the tables and views, nor those later migrations add\n")
}

func runDBA(verb string, args []string, act func(context.Context, dbsqlc.DBTX, string) error, done string) error {
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
	fmt.Printf(done, *role)
	return nil
}
