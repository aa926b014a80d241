package retention

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/testenv"
)

// rowsOf is every row of the per-envelope tables for the envelopes ids, as
// PostgreSQL writes each row as text, sorted.
func rowsOf(t testing.TB, pool *pgxpool.Pool, ids ...int64) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, tb := range tables {
		col := "envelope_id"
		if tb.name == "envelopes" {
			col = "id"
		}
		from := tb.name
		if tb.name == "events" { // both kinds, as the archive writes them
			from = "(SELECT * FROM events UNION ALL SELECT * FROM claim_events)"
		}
		rows, err := pool.Query(context.Background(),
			fmt.Sprintf("SELECT r::text FROM %s r WHERE %s = ANY($1) ORDER BY 1", from, col), ids)
		if err != nil {
			t.Fatal(err)
		}
		out[tb.name], err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// load copies a set back into pool as a DBA would: each file with COPY FROM
// and the manifest's column list, in the manifest's order.
func load(t testing.TB, pool *pgxpool.Pool, set string) {
	t.Helper()
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, tm := range manifestOf(t, set).Tables {
		f, err := os.Open(filepath.Join(set, tm.File))
		if err != nil {
			t.Fatal(err)
		}
		cols := make([]string, len(tm.Columns))
		for i, c := range tm.Columns {
			cols[i] = pgx.Identifier{c}.Sanitize()
		}
		tag, err := conn.Conn().PgConn().CopyFrom(context.Background(), f,
			fmt.Sprintf("COPY %s (%s) FROM STDIN", pgx.Identifier{tm.Table}.Sanitize(), strings.Join(cols, ", ")))
		_ = f.Close()
		if err != nil || tag.RowsAffected() != tm.Rows {
			t.Fatalf("load %s: %v rows, %v; the manifest says %d", tm.File, tag.RowsAffected(), err, tm.Rows)
		}
	}
}

// The files of a set load back with COPY FROM into a fresh database and
// reproduce every row exactly: text with tabs, newlines, backslashes and
// quotes, JSON, NULLs, times; a run's claim events come back as events rows.
func TestArchiveLoadsBack(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	for id := int64(1); id <= 3; id++ {
		seed(t, pool, id, 7, "settled", now.Add(-48*time.Hour))
	}
	asRun(t, pool, 2)
	want := rowsOf(t, pool, 1, 2, 3)
	res, err := Run(t.Context(), pool, options(t, 24*time.Hour))
	if err != nil || res.Removed.Envelopes != 3 {
		t.Fatalf("run: %+v, %v", res, err)
	}
	var runs int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM claim_event_runs`).Scan(&runs); err != nil || runs != 0 {
		t.Errorf("%d runs of claim events left after the run, %v", runs, err)
	}
	fresh, _ := testenv.Postgres(t)
	load(t, fresh, res.Set)
	got := rowsOf(t, fresh, 1, 2, 3)
	for name, rows := range want {
		if len(rows) == 0 {
			t.Errorf("%s: the seed wrote no rows; the test would prove nothing", name)
		}
		if !slices.Equal(got[name], rows) {
			t.Errorf("%s loaded back:\n%v\nwant\n%v", name, got[name], rows)
		}
	}
}

// Runs at the same time never both take an envelope, and every envelope
// deleted is in exactly one set, with the rows that were deleted.
func TestConcurrentRunsArchiveEveryDeletedRowOnce(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	const envelopes, packets = 12, 5
	for id := int64(1); id <= envelopes; id++ {
		seed(t, pool, id, packets, "settled", now.Add(-48*time.Hour))
	}
	dir := t.TempDir()
	var wg sync.WaitGroup
	results := make([]Result, 3)
	errs := make([]error, 3)
	for i := range results {
		wg.Go(func() {
			o := options(t, 24*time.Hour)
			o.Dir, o.Batch = dir, 1
			results[i], errs[i] = Run(t.Context(), pool, o)
		})
	}
	wg.Wait()
	var removed int64
	for i := range results {
		if errs[i] != nil {
			t.Errorf("run %d: %v", i, errs[i])
		}
		removed += results[i].Removed.Envelopes
	}
	seen := map[string]int{}
	var packetRows int64
	for _, s := range sets(t, dir) {
		for _, line := range strings.Split(strings.TrimSpace(readFile(t, filepath.Join(s, "envelopes.tsv"))), "\n") {
			seen[strings.SplitN(line, "\t", 2)[0]]++
		}
		packetRows += manifestOf(t, s).Tables[1].Rows
	}
	left := count(t, pool, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)["envelopes"]
	if removed+left != envelopes || len(seen) != int(removed) || packetRows != removed*packets {
		t.Errorf("removed %d, left %d, archived %v with %d packet rows", removed, left, seen, packetRows)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("envelope %s is in %d sets", id, n)
		}
	}
}

// tablesKept are the tables with an envelope_id column whose rows outlive
// their envelope, and why.
var tablesKept = map[string]string{
	"idempotency_keys": "a key expires on its own (IDEMPOTENCY_TTL); a repeated create must still find it",
}

// Every table keyed by an envelope is archived and deleted with it, or kept
// on purpose: a table a later migration adds must be one or the other.
func TestEveryEnvelopeTableIsArchived(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	rows, err := pool.Query(t.Context(), `SELECT c.table_name::text FROM information_schema.columns c
        JOIN information_schema.tables t USING (table_schema, table_name)
        WHERE c.table_schema = 'public' AND c.column_name = 'envelope_id' AND t.table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	archived := map[string]bool{"envelopes": true}
	for _, tb := range tables {
		archived[tb.name] = true
		for _, h := range tb.holds {
			archived[h] = true
		}
	}
	for _, name := range found {
		if _, kept := tablesKept[name]; !archived[name] && !kept {
			t.Errorf("table %s holds rows of envelopes: archive it (retention.sql, tables) or say why it is kept", name)
		}
	}
	if len(found) < len(tables)-1 {
		t.Errorf("found only %v; is the query right?", found)
	}
}

// check refuses a deletion that differs from what the files received in
// any count or sum, and accepts one that matches.
func TestCheckComparesEveryFigure(t *testing.T) {
	t.Parallel()
	s := &set{}
	for _, tb := range tables {
		s.files = append(s.files, &tableFile{spec: tb, sums: make([]int64, len(tb.sums))})
	}
	m := s.mark()
	env, pk := s.files[0], s.files[1]
	env.rows, env.sums = 1, []int64{300, 200, 100}
	pk.rows, pk.sums = 3, []int64{300, 200, 100}
	for _, f := range s.files[2:] {
		f.rows = 2
	}
	ok := dbsqlc.RetentionDeleteRow{Envelopes: 1, TotalCents: 300, ClaimedCents: 200, RefundedCents: 100, Packets: 3,
		PacketCents: 300, PacketClaimedCents: 200, PacketRefundedCents: 100, Recipients: 2, Commitments: 2, Events: 2, Conflicts: 2,
		ClaimedPackets: 2, Claims: 2, ClaimsCents: 200}
	if err := s.check(m, ok, 1); err != nil {
		t.Fatalf("a matching deletion: %v", err)
	}
	type row = dbsqlc.RetentionDeleteRow
	for name, bad := range map[string]func(*row){
		"envelopes":       func(d *row) { d.Envelopes = 2 },
		"total":           func(d *row) { d.TotalCents++ },
		"claimed":         func(d *row) { d.ClaimedCents-- },
		"refunded":        func(d *row) { d.RefundedCents++ },
		"packets":         func(d *row) { d.Packets++ },
		"packet cents":    func(d *row) { d.PacketCents++ },
		"packet claimed":  func(d *row) { d.PacketClaimedCents++ },
		"packet refunded": func(d *row) { d.PacketRefundedCents-- },
		"recipients":      func(d *row) { d.Recipients++ },
		"commitments":     func(d *row) { d.Commitments-- },
		"events":          func(d *row) { d.Events++ },
		"conflicts":       func(d *row) { d.Conflicts++ },
	} {
		d := ok
		bad(&d)
		if err := s.check(m, d, 1); !errors.Is(err, ErrMismatch) {
			t.Errorf("%s differs: %v, want ErrMismatch", name, err)
		}
	}
	// Deleted as archived, but money that does not add up.
	for name, bad := range map[string]func(*row){
		"a claim without its packet":  func(d *row) { d.Claims++ },
		"a claim of another amount":   func(d *row) { d.ClaimsCents++ },
		"claimed + refunded != total": func(d *row) { d.ClaimedCents, d.PacketClaimedCents, d.ClaimsCents = 150, 150, 150 },
	} {
		d := ok
		bad(&d)
		pk.sums = []int64{d.PacketCents, d.PacketClaimedCents, d.PacketRefundedCents}
		env.sums = []int64{d.TotalCents, d.ClaimedCents, d.RefundedCents}
		if err := s.check(m, d, 1); !errors.Is(err, ErrUnbalanced) {
			t.Errorf("%s: %v, want ErrUnbalanced", name, err)
		}
	}
}
