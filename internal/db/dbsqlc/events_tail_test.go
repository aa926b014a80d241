package dbsqlc_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// eventsTail is how every statement that writes events ends: after its CTE
// new_events (kind, at, ref for the order; type, envelope_id, packet_id,
// data), take the ids with take_event_ids, under its lock, and insert.
const eventsTail = `
, event_base AS (SELECT take_event_ids(count(*)) AS base FROM new_events)
, event_rows AS (
    INSERT INTO events (id, type, envelope_id, packet_id, data)
    SELECT b.base + row_number() OVER (ORDER BY n.kind, n.at, n.ref), n.type, n.envelope_id, n.packet_id, n.data
    FROM new_events n CROSS JOIN event_base b
    RETURNING id
)`

// claimRunsTail is how AddClaims, and it alone, ends: the positions it
// takes are its applied claims' (their events are runs, one per envelope
// it changed: claim_event_runs) and then its new_events'.
const claimRunsTail = `
, event_base AS (
    SELECT take_event_ids((SELECT coalesce(sum(n), 0) FROM changed)::bigint + count(*)) AS base FROM new_events
)
, run_rows AS (
    INSERT INTO claim_event_runs (first_position, last_position, envelope_id, packet_ids, delivered_through)
    SELECT b.base + r.start + 1, b.base + r.start + r.n, r.envelope_id, a.packet_ids[r.start + 1 : r.start + r.n],
           b.base + r.start
    FROM runs r JOIN changed c ON c.id = r.envelope_id CROSS JOIN arg a CROSS JOIN event_base b
)
, event_rows AS (
    INSERT INTO events (id, type, envelope_id, packet_id, data)
    SELECT b.base + (SELECT sum(n) FROM changed)::bigint + row_number() OVER (ORDER BY n.kind, n.at, n.ref),
           n.type, n.envelope_id, n.packet_id, n.data
    FROM new_events n CROSS JOIN event_base b
    RETURNING id
)`

var queryName = regexp.MustCompile(`(?m)^-- name: (\w+)`)

// TestEventsTailIsTheSameEverywhere keeps one way of writing events: every
// query with a CTE new_events ends it with eventsTail, word for word (but
// AddClaims, with claimRunsTail), and no query takes event ids otherwise.
func TestEventsTailIsTheSameEverywhere(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(root, "internal/db/query/*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no queries found: %v", err)
	}
	writers := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(src)
		starts := queryName.FindAllStringSubmatchIndex(text, -1)
		for i, m := range starts {
			end := len(text)
			if i+1 < len(starts) {
				end = starts[i+1][0]
			}
			name, q := text[m[2]:m[3]], text[m[0]:end]
			writes := strings.Contains(q, "new_events AS (")
			if writes {
				writers++
				tail := eventsTail
				if name == "AddClaims" {
					tail = claimRunsTail
				}
				if strings.Count(q, tail) != 1 {
					t.Errorf("%s (%s) writes events but does not end them with the shared tail", name, filepath.Base(f))
				}
			}
			if !writes && (strings.Contains(q, "take_event_ids") || strings.Contains(q, "INSERT INTO events") ||
				strings.Contains(q, "INSERT INTO claim_event_runs")) {
				t.Errorf("%s (%s) writes events without a new_events CTE and the shared tail", name, filepath.Base(f))
			}
		}
	}
	if writers < 6 {
		t.Errorf("%d queries write events, want at least 6 (claims, sold out, settled, suspended, recovered)", writers)
	}
}
