package migrations_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/testenv"
)

// The schema describes itself (psql's \dt+, \dv+, \d+ and \df+): every
// table, partitioned table, view and materialized view of the schema, every
// column of each (partitions inherit their parent's), and every function
// carries a COMMENT. The query reads the catalog, so what a later migration
// adds is held to the same rule without this test knowing its name.
// schema_migrations belongs to golang-migrate.
const uncommented = `
SELECT 'relation ' || c.relname
FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND NOT c.relispartition AND c.relname <> 'schema_migrations'
  AND obj_description(c.oid, 'pg_class') IS NULL
UNION ALL
SELECT 'column ' || c.relname || '.' || a.attname
FROM pg_class c
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
  AND NOT c.relispartition AND c.relname <> 'schema_migrations'
  AND col_description(c.oid, a.attnum) IS NULL
UNION ALL
SELECT 'function ' || p.oid::regprocedure::text
FROM pg_proc p
WHERE p.pronamespace = current_schema()::regnamespace
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
  AND obj_description(p.oid, 'pg_proc') IS NULL
ORDER BY 1`

func TestSchemaIsCommented(t *testing.T) {
	t.Parallel()
	c := connect(t, testenv.PostgresURL(t))
	missing := strings.Join(queryStrings(t, c, uncommented), "\n  ")
	if missing != "" {
		t.Errorf("without a COMMENT ON (say what a row is; for a column what it holds, its unit, when it is set):\n  %s", missing)
	}
}

// The check above sees what it must: a table, a column and a function added
// without comments are each reported.
func TestSchemaCommentCheckFindsNewObjects(t *testing.T) {
	t.Parallel()
	c := connect(t, testenv.PostgresURL(t))
	for _, stmt := range []string{
		`CREATE TABLE later_ledger (id bigint PRIMARY KEY)`,
		`ALTER TABLE packet_pool ADD COLUMN later_note text`,
		`CREATE VIEW later_view AS SELECT 1 AS one`,
		`CREATE FUNCTION later_fn() RETURNS int LANGUAGE sql AS 'SELECT 1'`,
	} {
		if _, err := c.Exec(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	got := strings.Join(queryStrings(t, c, uncommented), "\n")
	for _, want := range []string{"relation later_ledger", "column later_ledger.id", "column packet_pool.later_note",
		"relation later_view", "column later_view.one", "function later_fn()"} {
		if !strings.Contains(got, want+"\n") && !strings.HasSuffix(got, want) {
			t.Errorf("%q not reported; reported:\n%s", want, got)
		}
	}
}

func connect(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func queryStrings(t *testing.T, c *pgx.Conn, q string) []string {
	t.Helper()
	rows, err := c.Query(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}
