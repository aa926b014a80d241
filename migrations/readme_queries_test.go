package migrations_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
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
// all of events or packets (each grows by a row per grab) or of envelopes.
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
		var nodes []planNode
		if err := json.Unmarshal([]byte(plan), &nodes); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			for _, rel := range n.Plan.seqScans() {
				if rel == "events" || rel == "packets" || rel == "envelopes" {
					t.Errorf("README query reads all of %s (sequential scan):\n%s\nplan: %s", rel, q, plan)
				} else {
					t.Logf("README query scans %s sequentially (small here): %s", rel, q)
				}
			}
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
