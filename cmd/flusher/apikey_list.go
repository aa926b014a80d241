package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"redpacket/internal/apikey"
)

// runAPIKeyList is `flusher apikey list [-all] [-json]`: the active keys
// (every key with -all) by name, with their clients, scopes, creation and last use;
// never key material.
func runAPIKeyList(args []string) error {
	fs := flag.NewFlagSet("apikey list", flag.ContinueOnError)
	all := fs.Bool("all", false, "list revoked keys too, with when they were revoked")
	asJSON := fs.Bool("json", false, `print {"keys": [...]} as JSON`)
	if err := parseFlags(fs, apikeyListSynopsis, args); err != nil {
		return helpIsDone(err)
	}
	ctx, db, done, err := keysDB()
	if err != nil {
		return err
	}
	defer done()
	keys, err := apikey.List(ctx, db, *all)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Keys []apikey.Listed `json:"keys"`
		}{keys})
	}
	return writeKeys(os.Stdout, keys, *all)
}

// writeKeys writes the keys as a table; times in UTC to the second.
func writeKeys(out io.Writer, keys []apikey.Listed, all bool) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := "NAME\tCLIENT\tSCOPES\tCREATED\tLAST USED"
	if all {
		header += "\tREVOKED"
	}
	_, _ = fmt.Fprintln(w, header) // the tabwriter holds the lines: Flush reports a failure
	for _, k := range keys {
		line := k.Name + "\t" + k.Client + "\t" + strings.Join(k.Scopes, ",") + "\t" + when(&k.CreatedAt) + "\t" + when(k.LastUsedAt)
		if all {
			line += "\t" + when(k.RevokedAt)
		}
		_, _ = fmt.Fprintln(w, line)
	}
	return w.Flush()
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
