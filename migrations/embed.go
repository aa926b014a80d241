// Package migrations holds the numbered schema migrations, embedded so that
// the binaries carry the schema they need.
package migrations

import "embed"

// FS holds every NNNNNN_name.up.sql / .down.sql pair.
//
//go:embed *.sql
var FS embed.FS

// Version is the schema version this build needs: the highest migration here.
// Daemons refuse to run against an older schema.
const Version = 27
