package migrations_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/testenv"
)

// dbaQueries returns the statements of the README's "For DBAs" example
// block: what a DBA is told to run, so what the schema must answer without
// reading a whole table.
func dbaQueries(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	start := strings.Index(section, "## For DBAs")
	if start < 0 {
		t.Fatal(`README.md has no "## For DBAs" section`)
	}
	section = section[start:]
	block := regexp.MustCompile("(?s)```sql\n(.*?)```").FindStringSubmatch(section)
	if block == nil {
		t.Fatal(`README.md's "For DBAs" section has no sql block`)
	}
	comment := regexp.MustCompile(`--[^\n]*`)
	var out []string
	for _, stmt := range strings.Split(comment.ReplaceAllString(block[1], ""), ";") {
		if stmt = strings.TrimSpace(stmt); stmt != "" {
			out = append(out, stmt)
		}
	}
	if len(out) < 5 {
		t.Fatalf("found %d statements in the README's sql block, want its examples:\n%s", len(out), block[1])
	}
	return out
}

// seedDBAData fills a database with a few thousand envelopes, their packets
// (most claimed, user bob among them) and their events (most delivered, a
// few being retried), as a deployment would hold, and analyses it, so the
// planner chooses as it would there.
func seedDBAData(ctx context.Context, t *testing.T, c *pgx.Conn) {
	t.Helper()
	for _, q := range []string{
		`INSERT INTO envelopes (id, shard, share_code, sender_id, total_cents, count, status, created_at, expires_at, settled_at,
		     claimed_cents, refunded_cents, suspended_at, suspend_reason)
		 SELECT i, i % 16, 'c' || i, 's' || (i % 50), 2000, 20,
		        CASE WHEN i % 500 = 0 THEN 'suspended' WHEN i % 3 = 0 THEN 'open' ELSE 'settled' END,
		        now() - (i % 96) * interval '1 hour', now() + interval '1 hour',
		        CASE WHEN i % 500 <> 0 AND i % 3 <> 0 THEN now() - (i % 96) * interval '1 hour' END,
		        1500, CASE WHEN i % 500 <> 0 AND i % 3 <> 0 THEN 500 ELSE 0 END,
		        CASE WHEN i % 500 = 0 THEN now() END, CASE WHEN i % 500 = 0 THEN 'redis lost' END
		 FROM generate_series(1001, 5000) i`,
		`INSERT INTO packets (id, envelope_id, amount_cents, claimed_by, claimed_at, order_no)
		 SELECT (e - 1001) * 20 + g + 1, e, 100,
		        CASE WHEN g < 15 THEN CASE WHEN e = 1001 AND g = 0 THEN 'bob' ELSE 'u' || ((e * 20 + g) % 3000) END END,
		        CASE WHEN g < 15 THEN now() - g * interval '1 minute' END,
		        CASE WHEN g < 15 THEN 'o' || ((e - 1001) * 20 + g + 1) END
		 FROM generate_series(1001, 5000) e, generate_series(0, 19) g`,
		`INSERT INTO events (id, type, envelope_id, packet_id, delivered_at, attempts, next_attempt_at, last_error)
		 SELECT row_number() OVER (ORDER BY p.id), 'packet.claimed', p.envelope_id, p.id,
		        CASE WHEN p.id % 1000 = 0 THEN NULL ELSE now() END,
		        CASE WHEN p.id % 1000 = 0 THEN 3 ELSE 0 END,
		        CASE WHEN p.id % 1000 = 0 THEN now() + interval '1 minute' END,
		        CASE WHEN p.id % 1000 = 0 THEN '503 from the receiver' END
		 FROM packets p WHERE p.claimed_by IS NOT NULL`,
		// A run of a later batch for every envelope: one claim event each,
		// after the events rows' positions; most delivered, a few retried.
		`INSERT INTO claim_event_runs (first_position, last_position, envelope_id, packet_ids, delivered_through,
		     delivered_at, attempts, next_attempt_at, last_error)
		 SELECT 100000 + e, 100000 + e, e, ARRAY[(e - 1001) * 20 + 16],
		        CASE WHEN e % 200 = 0 THEN 100000 + e - 1 ELSE 100000 + e END,
		        CASE WHEN e % 200 = 0 THEN NULL ELSE now() END,
		        CASE WHEN e % 200 = 0 THEN 2 ELSE 0 END,
		        CASE WHEN e % 200 = 0 THEN now() + interval '1 minute' END,
		        CASE WHEN e % 200 = 0 THEN 'timeout' END
		 FROM generate_series(1001, 5000) e`,
		`INSERT INTO claim_conflicts (envelope_id, packet_id, user_id, claimed_at, reason)
		 VALUES (1002, 21, 'eve', now(), 'claimed_by_other')`,
		`ANALYZE`,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("seed: %v\n%s", err, q)
		}
	}
}

// Every query the README gives DBAs is answered from indexes: none reads
// all of events or packets (each grows by a row per grab) or of envelopes
// (see bigRelations).
func TestREADMEQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	_, url := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	seedDBAData(ctx, t, c)
	for _, q := range dbaQueries(t) {
		var plan string
		if err := c.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+q).Scan(&plan); err != nil {
			t.Errorf("EXPLAIN %s: %v", q, err)
			continue
		}
		big, small, err := seqScannedRelations(plan)
		if err != nil {
			t.Fatal(err)
		}
		for _, rel := range big {
			t.Errorf("README query reads all of %s (sequential scan):\n%s\nplan: %s", rel, q, plan)
		}
		for _, rel := range small {
			t.Logf("README query scans %s sequentially (small here): %s", rel, q)
		}
	}
}

// bigRelations are the tables that grow with every envelope or grab: no
// README query may read all of one (claim_event_runs grows by a row per
// envelope a batch). packets is a view since migration 16,
// so plans never name it but the two tables under it, packet_pool and
// claims (as internal/dbadmin's seqScansPackets checks for docs/dba.md).
var bigRelations = map[string]bool{
	"envelopes":        true,
	"events":           true,
	"claim_event_runs": true,
	"packet_pool":      true,
	"claims":           true,
}

// seqScannedRelations reads an EXPLAIN (FORMAT JSON) answer and returns the
// relations it scans sequentially: the big ones, which the test refuses,
// and the others, which it only logs.
func seqScannedRelations(planJSON string) (big, small []string, err error) {
	var nodes []planNode
	if err := json.Unmarshal([]byte(planJSON), &nodes); err != nil {
		return nil, nil, fmt.Errorf("read EXPLAIN (FORMAT JSON) answer: %w", err)
	}
	for _, n := range nodes {
		for _, rel := range n.Plan.seqScans() {
			if bigRelations[rel] {
				big = append(big, rel)
			} else {
				small = append(small, rel)
			}
		}
	}
	return big, small, nil
}

// A query reading the packets view by a column no index covers is planned
// as a sequential scan of a table under the view: the check refuses it,
// though the plan never names packets.
func TestSeqScansUnderPacketsViewAreRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		query, plan, table string
	}{
		// PostgreSQL's plan for it, trimmed: packet_pool read whole, claims by index.
		{"SELECT * FROM packets WHERE amount_cents = 5", `[{"Plan": {"Node Type": "Nested Loop", "Plans": [
			{"Node Type": "Seq Scan", "Relation Name": "packet_pool", "Alias": "p"},
			{"Node Type": "Index Scan", "Relation Name": "claims", "Alias": "c"}]}}]`, "packet_pool"},
		{"SELECT * FROM packets WHERE order_no LIKE '2025%'", `[{"Plan": {"Node Type": "Nested Loop", "Plans": [
			{"Node Type": "Seq Scan", "Relation Name": "claims", "Alias": "c"},
			{"Node Type": "Index Scan", "Relation Name": "packet_pool", "Alias": "p"}]}}]`, "claims"},
	} {
		big, small, err := seqScannedRelations(c.plan)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(big, []string{c.table}) || len(small) != 0 {
			t.Errorf("%s: refused the sequential scans of %q, only logged %q; want %s refused", c.query, big, small, c.table)
		}
	}
}

// planNode is a node of EXPLAIN (FORMAT JSON).
type planNode struct {
	Plan plan `json:"Plan"`
}

type plan struct {
	NodeType string `json:"Node Type"`
	Relation string `json:"Relation Name"`
	Plans    []plan `json:"Plans"`
}

// seqScans returns the relations the plan scans sequentially.
func (p plan) seqScans() []string {
	var out []string
	if p.NodeType == "Seq Scan" {
		out = append(out, p.Relation)
	}
	for _, c := range p.Plans {
		out = append(out, c.seqScans()...)
	}
	return out
}
