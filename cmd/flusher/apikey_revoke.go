package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"redpacket/internal/apikey"
)

// runAPIKeyRevoke is `flusher apikey revoke -name NAME`. Every grabber
// refuses the key within seconds, without a restart; exit 1 when no active
// key has that name.
func runAPIKeyRevoke(args []string) error {
	fs := flag.NewFlagSet("apikey revoke", flag.ContinueOnError)
	name := fs.String("name", "", "the name of the active key to revoke")
	if err := parseFlags(fs, apikeyRevokeSynopsis, args); err != nil {
		return helpIsDone(err)
	}
	if *name == "" {
		fmt.Fprintln(os.Stderr, "flusher apikey revoke: needs -name")
		fmt.Fprintln(os.Stderr, "usage: flusher apikey revoke", apikeyRevokeSynopsis)
		return errUsage
	}
	ctx, db, done, err := keysDB()
	if err != nil {
		return err
	}
	defer done()
	err = apikey.Revoke(ctx, db, *name)
	if errors.Is(err, apikey.ErrMalformed) {
		return errors.Join(err, errUsage)
	}
	if err != nil {
		return err
	}
	fmt.Printf("revoked key %q; grabbers refuse it within seconds\n", *name)
	return nil
}
