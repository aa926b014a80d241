package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/testenv"
)

// BenchmarkPartitionedClaims measures, in one run, what range partitions of
// the claims by envelope id would gain the claim write and cost a user's
// history page: the claim write grows with the user index (docs/scaling.md,
// "Ledger growth"), and partitions keep the index that new claims go to
// small, but a user's page then reads an index per partition. Nothing of
// it ships: its tables live only in the benchmark's database.
//
// The tables hold the same LEDGER_PARTITION_ROWS claims (default
// 5,000,000; 10 a seeded envelope, by users of a population of 1,000,003):
// "whole" with the claims table's columns and indexes, and "parts_K" for
// each K of LEDGER_PARTITIONS (default "10,50") with the same columns split
// into K partitions of as many seeded envelopes, the last one open above.
// A partitioned table's unique indexes must hold the partition key, so its
// order numbers are unique per envelope there (unique (order_no,
// envelope_id)); the other indexes are the shipped ones. The operations
// (the pages after six untimed runs on every table),
// each on every table in turn, the first one rotating:
//
//   - write: COPY of 2,000 claims of fresh envelopes, newer than every
//     seeded one (so into the last partition), by users of the population,
//     after a CHECKPOINT at the start, as the growth benchmark's claims;
//   - write-recorded: the same, and in its transaction each user's record
//     of the lowest envelope id claimed from (a table of its own beside
//     each table, one row a user, filled from the seeded claims) lowered
//     where a claim is lower: what the bounded pages below would need; the
//     fresh envelopes are above every record, so it reads them only;
//   - page-many: the first page (100 rows) of probe-user, who holds a claim
//     in 2,000 envelopes spread over the whole ledger, so over every
//     partition: an ordered scan that stops in the newest ones;
//   - page-few: the first page of probe-few, who holds 5 claims, all in the
//     newest envelopes: 5 rows, and to know there are no more, a probe of
//     every partition's user index;
//   - page-few-bounded: the same page told where the user's claims start
//     (the lowest envelope id among probe-few's claims, as a record of it
//     per user would tell): pruning leaves out the partitions before it;
//   - page-many-custom, page-few-bounded-custom: those pages in sessions
//     with plan_cache_mode = force_custom_plan. Every statement is
//     prepared once (pgx's statement cache, as the store's are) and soon
//     runs a generic plan, which PostgreSQL 15 runs with every partition
//     locked, pruned or not; a custom plan is made for the values each
//     time and locks only the partitions it keeps.
//
// Each table's cost is reported per unit, and "ratio-X" is parts_X's over
// whole's.
//
//	go test -run=NONE -bench=BenchmarkPartitionedClaims -benchtime=200x ./internal/pgstore
//
// A table of 5 million claims takes about 1.1 GB with its indexes, and 30-40
// s to write on 2 cores.
func BenchmarkPartitionedClaims(b *testing.B) {
	pool, url := testenv.Postgres(b)
	rows := envInt(b, "LEDGER_PARTITION_ROWS", 5_000_000, 100_000, 100_000_000)
	if rows%10 != 0 {
		b.Fatalf("LEDGER_PARTITION_ROWS=%d: want a multiple of 10 (whole envelopes, so that probe-few's are the newest)", rows)
	}
	tables := []partTable{{name: "whole"}}
	for _, k := range envList(b, "LEDGER_PARTITIONS", "10,50", 2, 1000) {
		tables = append(tables, partTable{name: "parts_" + strconv.FormatInt(k, 10), parts: int(k)})
	}
	// Writing a table takes about 30 s for 5 million claims on 2 cores:
	// bounded by the work, generously.
	perTable := 5*time.Minute + time.Duration(rows/1_000_000)*30*time.Second
	ctx, cancel := context.WithTimeout(b.Context(), time.Duration(len(tables))*perTable)
	defer cancel()
	seedPartTables(ctx, b, url, rows, tables)
	custom := customPlanPool(b, url)
	fresh := rows/10 + 1_000 // envelope ids of the written claims start above the seeded ones
	written := int64(0)
	ops := []struct {
		name, unit string
		per        int
		run        func(t partTable) error
	}{
		{"write", "claim", claimBatch, func(t partTable) error {
			return copyPartClaims(ctx, pool, t.name, fresh, written, false)
		}},
		{"write-recorded", "claim", claimBatch, func(t partTable) error {
			return copyPartClaims(ctx, pool, t.name, fresh, written, true)
		}},
		{"page-many", "page", 1, func(t partTable) error {
			return readPartPage(ctx, pool, t.name, "probe-user", 0, historyLimit)
		}},
		{"page-many-custom", "page", 1, func(t partTable) error {
			return readPartPage(ctx, custom, t.name, "probe-user", 0, historyLimit)
		}},
		{"page-few", "page", 1, func(t partTable) error {
			return readPartPage(ctx, pool, t.name, "probe-few", 0, 5)
		}},
		{"page-few-bounded", "page", 1, func(t partTable) error {
			return readPartPage(ctx, pool, t.name, "probe-few", rows/10-4, 5)
		}},
		{"page-few-bounded-custom", "page", 1, func(t partTable) error {
			return readPartPage(ctx, custom, t.name, "probe-few", rows/10-4, 5)
		}},
	}
	for _, op := range ops {
		b.Run("op="+op.name, func(b *testing.B) {
			if op.unit == "claim" {
				if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
					b.Fatal(err)
				}
			} else {
				// Untimed, a connection opened and the statement run past
				// the five runs after which a prepared one may go generic.
				for range 6 {
					for _, t := range tables {
						if err := op.run(t); err != nil {
							b.Fatalf("%s on %s: %v", op.name, t.name, err)
						}
					}
				}
			}
			took := make([]time.Duration, len(tables))
			n := 0
			for b.Loop() {
				for k := range tables {
					i := (n + k) % len(tables)
					start := time.Now()
					if err := op.run(tables[i]); err != nil {
						b.Fatalf("%s on %s: %v", op.name, tables[i].name, err)
					}
					took[i] += time.Since(start)
				}
				if op.unit == "claim" {
					written += claimBatch // every table got the same batch
				}
				n++
			}
			units := float64(n * op.per)
			for i, t := range tables {
				b.ReportMetric(float64(took[i].Nanoseconds())/units, "ns/"+op.unit+"-"+t.name)
				if i > 0 {
					b.ReportMetric(float64(took[i])/float64(took[0]), "ratio-"+strconv.Itoa(t.parts))
				}
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// partTable is one table of BenchmarkPartitionedClaims: parts partitions,
// or none.
type partTable struct {
	name  string
	parts int
}

// partSeedSQL writes $1 claims into %s: packet p (1..$1) in envelope
// (p-1)/10+1 by a user of the population (distinct within an envelope), a
// second apart; probe-user's claim in every ($1/10/2,000)-th envelope and
// probe-few's in the 5 newest, of packet ids of their own.
const partSeedSQL = `INSERT INTO %s (envelope_id, packet_id, user_id, amount_cents, claimed_at, order_no, sender_id)
SELECT (p - 1) / 10 + 1, p, 'user-' || (p %% 1000003 * 2654435761 %% 1000003), 1 + p %% 97,
       $2::timestamptz + p * interval '1 second', '20300101' || lpad(p::text, 10, '0'), 'sender-' || ((p - 1) / 10 + 1) * 40503 %% 100003
FROM generate_series(1, $1::bigint) p
UNION ALL
SELECT e, 1000000000000 + e, 'probe-user', 50, $2::timestamptz + e * 10 * interval '1 second', '20300102' || lpad(e::text, 10, '0'), 'sender-1'
FROM generate_series(1, $1::bigint / 10) e WHERE e %% greatest($1::bigint / 10 / 2000, 1) = 0
UNION ALL
SELECT e, 2000000000000 + e, 'probe-few', 50, $2::timestamptz + e * 10 * interval '1 second', '20300103' || lpad(e::text, 10, '0'), 'sender-1'
FROM generate_series($1::bigint / 10 - 4, $1::bigint / 10) e`

// seedPartTables makes and fills the tables, their indexes built after the
// rows (as a load would), vacuumed and analysed.
func seedPartTables(ctx context.Context, b *testing.B, url string, rows int64, tables []partTable) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	growthExec(ctx, b, conn, "SET synchronous_commit = off", "SET maintenance_work_mem = '1GB'")
	envelopes := rows / 10
	for _, t := range tables {
		start := time.Now()
		orderKey := "UNIQUE (order_no)"
		if t.parts == 0 {
			growthExec(ctx, b, conn, fmt.Sprintf(`CREATE TABLE %s (LIKE claims INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`, t.name))
		} else {
			orderKey = "UNIQUE (order_no, envelope_id)"
			growthExec(ctx, b, conn, fmt.Sprintf(`CREATE TABLE %s (LIKE claims INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY RANGE (envelope_id)`, t.name))
			for i := range t.parts {
				from, to := "MINVALUE", "MAXVALUE"
				if i > 0 {
					from = strconv.FormatInt(1+int64(i)*envelopes/int64(t.parts), 10)
				}
				if i < t.parts-1 {
					to = strconv.FormatInt(1+int64(i+1)*envelopes/int64(t.parts), 10)
				}
				growthExec(ctx, b, conn, fmt.Sprintf(`CREATE TABLE %s_%d PARTITION OF %s FOR VALUES FROM (%s) TO (%s)`, t.name, i, t.name, from, to))
			}
		}
		if _, err := conn.Exec(ctx, fmt.Sprintf(partSeedSQL, t.name), rows, t0.AddDate(-1, 0, 0)); err != nil {
			b.Fatalf("seeding %s: %v", t.name, err)
		}
		growthExec(ctx, b, conn,
			fmt.Sprintf(`ALTER TABLE %s ADD PRIMARY KEY (envelope_id, packet_id), ADD UNIQUE (user_id, envelope_id), ADD %s`, t.name, orderKey),
			fmt.Sprintf(`CREATE INDEX ON %s USING brin (claimed_at) WITH (autosummarize = on)`, t.name),
			"VACUUM ANALYZE "+t.name)
		var size string
		if err := conn.QueryRow(ctx, `SELECT pg_size_pretty(pg_total_relation_size($1::regclass) +
			coalesce((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree($1::regclass) WHERE relid <> $1::regclass), 0))`,
			t.name).Scan(&size); err != nil {
			b.Fatal(err)
		}
		growthExec(ctx, b, conn, fmt.Sprintf(`CREATE TABLE %[1]s_user_low (user_id text PRIMARY KEY, low_envelope_id bigint NOT NULL)`, t.name),
			fmt.Sprintf(`INSERT INTO %[1]s_user_low SELECT user_id, min(envelope_id) FROM %[1]s GROUP BY user_id`, t.name),
			fmt.Sprintf(`VACUUM ANALYZE %s_user_low`, t.name))
		b.Logf("%s: %d claims in %d partitions, %s with its indexes, %s", t.name, rows, t.parts, size, time.Since(start).Round(time.Second))
	}
	growthExec(ctx, b, conn, "CHECKPOINT")
}

// copyPartClaims COPYs the claimBatch claims after the first written ones
// into table: 10 a fresh envelope from envelope fresh on. With record, in
// the same transaction it lowers each user's record of the lowest envelope
// id claimed from (table_user_low) where a claim is lower, and adds the
// users it lacks.
func copyPartClaims(ctx context.Context, pool *pgxpool.Pool, table string, fresh, written int64, record bool) error {
	src := make([][]any, claimBatch)
	users, envs := make([]string, claimBatch), make([]int64, claimBatch)
	for i := range src {
		n := written + int64(i)
		p := 3_000_000_000_000 + n
		users[i], envs[i] = "user-"+strconv.FormatInt(p%growthUsers*2654435761%growthUsers, 10), fresh+n/10
		src[i] = []any{envs[i], p, users[i], 1 + p%97, t0.Add(time.Duration(n) * time.Millisecond), fmt.Sprintf("20310101%010d", n), "sender-2"}
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		got, err := tx.CopyFrom(ctx, pgx.Identifier{table},
			[]string{"envelope_id", "packet_id", "user_id", "amount_cents", "claimed_at", "order_no", "sender_id"}, pgx.CopyFromRows(src))
		if err == nil && got != claimBatch {
			err = fmt.Errorf("copied %d rows; want %d", got, claimBatch)
		}
		if err != nil || !record {
			return err
		}
		// Only the users whose record is missing or higher reach the
		// INSERT: ON CONFLICT locks (writes) every row it meets, even one
		// its WHERE leaves as it is, and most claims change no record.
		_, err = tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %[1]s_user_low AS l (user_id, low_envelope_id)
			SELECT b.u, b.e FROM (SELECT u, min(e) AS e FROM unnest($1::text[], $2::bigint[]) AS x(u, e) GROUP BY u) b
			WHERE NOT EXISTS (SELECT 1 FROM %[1]s_user_low o WHERE o.user_id = b.u AND o.low_envelope_id <= b.e)
			ON CONFLICT (user_id) DO UPDATE SET low_envelope_id = excluded.low_envelope_id
			WHERE l.low_envelope_id > excluded.low_envelope_id`, table), users, envs)
		return err
	})
}

// customPlanPool is a pool on url whose sessions plan each statement for
// its values.
func customPlanPool(b *testing.B, url string) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	pool, err := pgxpool.NewWithConfig(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// readPartPage reads user's first history page from table, in the shape of
// the shipped UserClaimsPage (the sender read from the claim), of the
// envelopes from since on, and checks it holds want rows.
func readPartPage(ctx context.Context, pool *pgxpool.Pool, table, user string, since int64, want int) error {
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT envelope_id, sender_id, packet_id, amount_cents, order_no, claimed_at
		FROM %s WHERE user_id = $1 AND envelope_id < $2 AND envelope_id >= $3 ORDER BY envelope_id DESC LIMIT $4`, table),
		user, int64(1)<<62, since, historyLimit)
	if err != nil {
		return err
	}
	got := 0
	for rows.Next() {
		got++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("page of %d rows; want %d", got, want)
	}
	return nil
}

// envInt is the integer in environment variable name, def when unset,
// within [lo, hi].
func envInt(b *testing.B, name string, def, lo, hi int64) int64 {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		b.Fatalf("%s=%q: want a number from %d to %d", name, v, lo, hi)
	}
	return n
}

// envList is the comma-separated numbers of environment variable name (def
// when unset), each within [lo, hi].
func envList(b *testing.B, name, def string, lo, hi int64) []int64 {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	var ns []int64
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || n < lo || n > hi {
			b.Fatalf("%s=%q: want numbers from %d to %d, comma-separated", name, v, lo, hi)
		}
		ns = append(ns, n)
	}
	return ns
}
