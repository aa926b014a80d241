package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"redpacket/internal/apikey"
)

// runAPIKeyCreate is `flusher apikey create -name NAME [-client CLIENT] -scopes LIST`: it
// makes a key and prints it as the only line of standard output, the one
// time it is shown (only its hash is stored). A script takes it with
// KEY=$(flusher apikey create ...).
func runAPIKeyCreate(args []string) error {
	fs := flag.NewFlagSet("apikey create", flag.ContinueOnError)
	name := fs.String("name", "", "the key's name: 1 to 64 characters of A-Z a-z 0-9 _ . : @ -, unique among active keys")
	client := fs.String("client", "", "the client the key belongs to, the same characters (default: the name); a rotated key takes the old one's")
	scopeList := fs.String("scopes", "", "what the key may do, comma-separated: create, grab, read, events")
	if err := parseFlags(fs, apikeyCreateSynopsis, args); err != nil {
		return helpIsDone(err)
	}
	scopes, err := apikey.ParseScopes(*scopeList)
	if *name == "" || err != nil {
		if err == nil {
			err = errors.New("needs -name")
		}
		fmt.Fprintln(os.Stderr, "flusher apikey create:", err)
		fmt.Fprintln(os.Stderr, "usage: flusher apikey create", apikeyCreateSynopsis)
		return errUsage
	}
	ctx, db, done, err := keysDB()
	if err != nil {
		return err
	}
	defer done()
	key, err := apikey.Create(ctx, db, *name, *client, scopes)
	if errors.Is(err, apikey.ErrMalformed) {
		return errors.Join(err, errUsage)
	}
	if err != nil {
		return err
	}
	fmt.Println(key)
	fmt.Fprintf(os.Stderr, "flusher apikey create: key %q made, scopes %s; it is shown above and never again\n", *name, scopes)
	return nil
}
