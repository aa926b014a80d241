package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/envelope"
	"redpacket/internal/pgstore"
	"redpacket/internal/testenv"
)

// BenchmarkLedgerGrowth measures what the ledger's work costs as it grows:
// for each size of LEDGER_GROWTH_SIZES (packets, default "0,1000000"; the
// service's target is 0,1000000,10000000,50000000 with every cost at 50
// million within 20 % of the empty ledger's), a database of that many
// settled packets and a reference one of none, both holding the same probe
// rows, and on them the flusher's claim writes (ApplyClaims, batches of
// 2,000 new claims by existing users into fresh envelopes, events written),
// the create path's writes of a 1,000-packet envelope (split commitment,
// envelope and packets, MarkLoaded), and the first and a deep keyset page
// of the three history reads. Each operation runs on the grown ledger and
// on the reference alternately, so both figures come from the same moments
// of a shared machine; "ratio" is grown over empty. The empty ledger is
// the probe rows alone (about 40,000 packets). The seeded claims have no
// events: no read here uses them, and a new claim's event goes at the end
// of the events' indexes whatever their size. Each size's databases are
// dropped when its sub-benchmark ends.
//
//	LEDGER_GROWTH_SIZES=0,1000000,10000000,50000000 go test -run=NONE \
//	    -bench=BenchmarkLedgerGrowth -benchtime=4s -timeout=110m ./internal/pgstore
//
// 50 million packets take about 20 GB and 15 minutes to write on 2 cores.
//
// With LEDGER_GROWTH_WAL_COMPRESSION set (a wal_compression method: lz4,
// pglz, zstd; setting it per session needs a superuser), the claim writes
// are measured a second time with their sessions compressing the WAL's full
// page images, so that the server setting a DBA would choose is compared
// with the default in the same run. Each claim operation starts after a
// CHECKPOINT, so that both write every page they touch in full once.
//
// With LEDGER_GROWTH_WARM_CLAIMS=N, each claim operation on a grown ledger
// first writes N claims untimed, after the CHECKPOINT. The operation's
// envelopes draw on the same 100,000 or so users (an envelope's users are
// its packet ids mixed modulo the population, and consecutive envelopes'
// ids fall 30 apart there), so a million warm claims have touched the pages
// of the user index that the measured claims go to: already read and
// already written in full since the checkpoint, as on a ledger taking
// claims all day whose server keeps that index in shared_buffers. Without
// it, every measured claim is such a page's first since the checkpoint, the
// worst case.
//
// LEDGER_GROWTH_PREWARM=1 reads the user index (claims_user_envelope_key)
// of each ledger into shared_buffers before its claim operation
// (pg_prewarm, which a superuser installs in the benchmark's databases): a
// server whose shared_buffers hold that index keeps it there once warm, and
// pg_prewarm's autoprewarm brings it back after a restart; without it the
// index is read from the operating system's cache page by page as claims
// reach it.
//
// LEDGER_GROWTH_WAL_DETAIL=1 logs the WAL of each claim operation's first
// timed batch by relation, with its full-page images (pg_walinspect, which
// a superuser installs in the benchmark's databases).
func BenchmarkLedgerGrowth(b *testing.B) {
	for _, n := range envList(b, "LEDGER_GROWTH_SIZES", "0,1000000", 0, 500_000_000) {
		b.Run("size="+strconv.FormatInt(n, 10), func(b *testing.B) {
			// Writing the ledger takes minutes (50 million packets about
			// 15): bounded on its own, by the size (93 minutes at 50 million).
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute+time.Duration(n/1000)*100*time.Millisecond)
			defer cancel()
			grown, empty := seedLedger(ctx, b, n), seedLedger(ctx, b, 0)
			for _, op := range growthOps(ctx, os.Getenv("LEDGER_GROWTH_WAL_COMPRESSION")) {
				b.Run("op="+op.name, func(b *testing.B) { runGrowthOp(b, op, grown, empty) })
			}
		})
	}
}

// growthLedger is one database of BenchmarkLedgerGrowth and the keys of its
// probe rows.
type growthLedger struct {
	s          *pgstore.Store
	size       int64  // seeded packets
	url        string // the database's, for the compressed claim writes' own pool
	pool       *pgxpool.Pool
	big        int64      // the probe envelope of 20,000 claims
	user       historyKey // cursor of probe-user's deepest page
	sender     historyKey // cursor of probe-sender's deepest page
	created    int64      // envelopes the create operation wrote
	claimCount int64      // claims the claim operation made
}

// growthOp is one operation measured on both ledgers: start prepares it on
// a ledger and returns one run, which reports the time of its timed part.
type growthOp struct {
	name, unit string
	per        int // units per run
	start      func(b *testing.B, l *growthLedger) func() (time.Duration, error)
}

func growthOps(ctx context.Context, walCompression string) []growthOp {
	far := t0.AddDate(100, 0, 0)
	ops := []growthOp{
		pageOp("envelope-first", func(l *growthLedger) (int, error) {
			return pageRows(l.s.EnvelopeClaims(ctx, l.big, 1<<62, historyLimit))
		}),
		pageOp("envelope-deep", func(l *growthLedger) (int, error) {
			return pageRows(l.s.EnvelopeClaims(ctx, l.big, l.big*16+historyLimit, historyLimit))
		}),
		pageOp("user-first", func(l *growthLedger) (int, error) {
			return pageRows(l.s.UserClaims(ctx, "probe-user", 1<<62, historyLimit))
		}),
		pageOp("user-deep", func(l *growthLedger) (int, error) {
			return pageRows(l.s.UserClaims(ctx, "probe-user", l.user.id, historyLimit))
		}),
		pageOp("sender-first", func(l *growthLedger) (int, error) {
			return pageRows(l.s.SenderEnvelopes(ctx, "probe-sender", far, 1<<62, historyLimit))
		}),
		pageOp("sender-deep", func(l *growthLedger) (int, error) {
			return pageRows(l.s.SenderEnvelopes(ctx, "probe-sender", l.sender.at, l.sender.id, historyLimit))
		}),
		{name: "create", unit: "envelope", per: 1, start: func(_ *testing.B, l *growthLedger) func() (time.Duration, error) {
			return func() (time.Duration, error) { return createGrowthEnvelope(ctx, l) }
		}},
		{name: "claims", unit: "claim", per: claimBatch, start: func(b *testing.B, l *growthLedger) func() (time.Duration, error) {
			return claimGrowthBatch(ctx, b, l, l.s, growthClaimed)
		}},
	}
	if walCompression != "" {
		ops = append(ops, growthOp{name: "claims-wal-" + walCompression, unit: "claim", per: claimBatch,
			start: func(b *testing.B, l *growthLedger) func() (time.Duration, error) {
				return claimGrowthBatch(ctx, b, l, compressingStore(b, l.url, walCompression), growthClaimedCompressed)
			}})
	}
	return ops
}

// compressingStore is a Store on url whose sessions compress the WAL's full
// page images with method.
func compressingStore(b *testing.B, url, method string) *pgstore.Store {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["wal_compression"] = method
	pool, err := pgxpool.NewWithConfig(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pgstore.New(pool)
}

// pageOp times read, which must return a full page.
func pageOp(name string, read func(l *growthLedger) (int, error)) growthOp {
	return growthOp{name: name, unit: "page", per: 1, start: func(_ *testing.B, l *growthLedger) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			start := time.Now()
			got, err := read(l)
			if err == nil && got != historyLimit {
				err = fmt.Errorf("page of %d rows; want %d", got, historyLimit)
			}
			return time.Since(start), err
		}
	}}
}

// runGrowthOp runs op on both ledgers alternately, each first every other
// time, and reports the cost per unit on each and their ratio.
func runGrowthOp(b *testing.B, op growthOp, grown, empty *growthLedger) {
	ledgers := [2]*growthLedger{grown, empty}
	runs := [2]func() (time.Duration, error){op.start(b, grown), op.start(b, empty)}
	var took [2]time.Duration
	var wal [2]int64
	n := 0
	for b.Loop() {
		for k := range 2 {
			i := (n + k) % 2
			before := walPosition(b, ledgers[i])
			d, err := runs[i]()
			if err != nil {
				b.Fatalf("%s: %v", op.name, err)
			}
			took[i] += d
			wal[i] += walPosition(b, ledgers[i]) - before
		}
		n++
	}
	units := float64(n * op.per)
	if op.unit == "claim" {
		// The server's WAL between the two reads, one run's alone when
		// nothing else writes: full-page images show here.
		b.ReportMetric(float64(wal[0])/units, "wal-B/claim")
		b.ReportMetric(float64(wal[1])/units, "wal-B/claim-empty")
	}
	b.ReportMetric(float64(took[0].Nanoseconds())/units, "ns/"+op.unit)
	b.ReportMetric(float64(took[1].Nanoseconds())/units, "ns/"+op.unit+"-empty")
	b.ReportMetric(float64(took[0])/float64(took[1]), "ratio")
	b.ReportMetric(0, "ns/op")
}

// walInspectFrom readies pg_walinspect in l's database (a superuser's
// right) and returns the WAL position to read from.
func walInspectFrom(ctx context.Context, b *testing.B, l *growthLedger) string {
	var from string
	if _, err := l.pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`); err != nil {
		b.Fatal(err)
	}
	if err := l.pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&from); err != nil {
		b.Fatal(err)
	}
	return from
}

// logWALByRelation logs the WAL written since from, by relation and record
// type, largest first, with the full-page images among the records.
func logWALByRelation(ctx context.Context, b *testing.B, l *growthLedger, from string) {
	rows, err := l.pool.Query(ctx, `SELECT coalesce(c.relname, r.rel, '-'), r.rm, r.records, r.fpis, r.bytes FROM (
		SELECT substring(block_ref from 'rel [0-9]+/[0-9]+/([0-9]+)') AS rel, resource_manager || '/' || record_type AS rm,
		       count(*) AS records, count(*) FILTER (WHERE fpi_length > 0) AS fpis, sum(record_length) AS bytes
		FROM pg_get_wal_records_info($1::pg_lsn, pg_current_wal_flush_lsn()) GROUP BY 1, 2) r
		LEFT JOIN pg_class c ON c.relfilenode::text = r.rel ORDER BY r.bytes DESC LIMIT 10`, from)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var rel, rm string
		var records, fpis, bytes int64
		if err := rows.Scan(&rel, &rm, &records, &fpis, &bytes); err != nil {
			b.Fatal(err)
		}
		b.Logf("size %d, one batch's WAL: %s %s: %d records, %d with a full-page image, %d bytes", l.size, rel, rm, records, fpis, bytes)
	}
	if rows.Err() != nil {
		b.Fatal(rows.Err())
	}
}

// walPosition is the server's WAL insert position, in bytes.
func walPosition(b *testing.B, l *growthLedger) int64 {
	var pos int64
	if err := l.pool.QueryRow(b.Context(), `SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn`).Scan(&pos); err != nil {
		b.Fatal(err)
	}
	return pos
}

// Ids of the rows the operations write, far above the seeded ones: created
// envelopes 100,000,001.. (packets from 10^15), claimed envelopes
// 200,000,001.. (packets id*10^7, see batches).
const (
	growthCreated           = 100_000_000
	growthClaimed           = 200_000_000
	growthClaimedCompressed = 250_000_000 // the same, with the WAL compressed
	growthCreatedFirst      = 1_000_000_000_000_000
	growthUsers             = 1_000_003 // the user population: user-0 .. user-1000002
)

// createGrowthEnvelope writes a 1,000-packet envelope as the create path
// does (split commitment, envelope and packets, MarkLoaded) and times it.
func createGrowthEnvelope(ctx context.Context, l *growthLedger) (time.Duration, error) {
	l.created++
	id, first := growthCreated+l.created, growthCreatedFirst+l.created*1000
	amounts := make([]int64, 1000)
	var total int64
	for i := range amounts {
		amounts[i] = 1 + (first+int64(i))*31%97
		total += amounts[i]
	}
	code := fmt.Sprintf("%011d", id)
	at := t0.AddDate(0, 0, 1).Add(time.Duration(l.created) * time.Millisecond)
	e := pgstore.Envelope{
		ID: id, Shard: int(id % 16), ShareCode: &code, SenderID: "sender-" + strconv.FormatInt(id*40503%100003, 10),
		TotalCents: total, Count: len(amounts), CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour),
	}
	commit := envelope.CommitSplit(envelope.HandOutOrder(first, amounts))
	start := time.Now()
	if err := l.s.InsertEnvelopeFor(ctx, e, pgstore.NewEnvelope{FirstPacketID: first, Amounts: amounts, Split: &commit}); err != nil {
		return 0, err
	}
	if status, err := l.s.MarkLoaded(ctx, id); err != nil || status != envelope.StatusOpen {
		return 0, fmt.Errorf("MarkLoaded(%d) = %q, %w", id, status, err)
	}
	return time.Since(start), nil
}

// claimGrowthBatch prepares the claim operation on l, written through s:
// after a CHECKPOINT (and the warm claims, see BenchmarkLedgerGrowth), ApplyClaims of 2,000 new claims of fresh
// 100,000-packet envelopes (ids from env+1), each by a user of the
// population (spread over the user index as real grabs are), newer than
// every seeded claim, with an order number.
func claimGrowthBatch(ctx context.Context, b *testing.B, l *growthLedger, s *pgstore.Store, env int64) func() (time.Duration, error) {
	// The operation starts on the grown ledger (runGrowthOp), and a
	// checkpoint is the whole server's: one there serves both ledgers, and
	// one on the empty ledger would undo the grown one's warm claims.
	if l.size > 0 {
		conn, err := pgx.Connect(ctx, l.url)
		if err != nil {
			b.Fatal(err)
		}
		growthExec(ctx, b, conn, "CHECKPOINT")
		_ = conn.Close(ctx)
	}
	if os.Getenv("LEDGER_GROWTH_PREWARM") != "" {
		prewarmUserIndex(ctx, b, l)
	}
	bs := newBatches(b, s)
	bs.env = env
	bs.claimOf = func(env, p int64) pgstore.Claim {
		l.claimCount++
		return pgstore.Claim{
			EnvelopeID: env, PacketID: p, UserID: "user-" + strconv.FormatInt(p%growthUsers*2654435761%growthUsers, 10),
			AmountCents: benchAmount(env, p),
			ClaimedAt:   t0.AddDate(0, 0, 2).Add(time.Duration(l.claimCount) * time.Millisecond),
			OrderNo:     fmt.Sprintf("20310101%010d", l.claimCount),
		}
	}
	if l.size > 0 {
		warm, _ := strconv.Atoi(os.Getenv("LEDGER_GROWTH_WARM_CLAIMS"))
		for range warm / claimBatch {
			if _, err := s.ApplyClaims(ctx, bs.next(ctx)); err != nil {
				b.Fatal(err)
			}
		}
	}
	detail := os.Getenv("LEDGER_GROWTH_WAL_DETAIL") != ""
	return func() (time.Duration, error) {
		batch := bs.next(ctx)
		var from string
		if detail {
			from = walInspectFrom(ctx, b, l)
		}
		start := time.Now()
		res, err := s.ApplyClaims(ctx, batch)
		took := time.Since(start)
		if detail {
			detail = false
			logWALByRelation(ctx, b, l, from)
		}
		if err == nil && (res.Applied != claimBatch || len(res.Conflicts) != 0) {
			err = fmt.Errorf("applied %d, %d conflicts; want %d, 0", res.Applied, len(res.Conflicts), claimBatch)
		}
		return took, err
	}
}

// prewarmUserIndex reads l's user index into shared_buffers.
func prewarmUserIndex(ctx context.Context, b *testing.B, l *growthLedger) {
	var blocks int64
	if _, err := l.pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_prewarm`); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := l.pool.QueryRow(ctx, `SELECT pg_prewarm('claims_user_envelope_key')`).Scan(&blocks); err != nil {
		b.Fatal(err)
	}
	b.Logf("size %d: user index prewarmed, %d blocks in %s", l.size, blocks, time.Since(start).Round(time.Millisecond))
}

// seedLedger makes a database of n settled packets (see writeGrowthTables)
// with the migrated schema, vacuumed and analysed.
func seedLedger(ctx context.Context, b *testing.B, n int64) *growthLedger {
	pool, url := testenv.Postgres(b)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	start := time.Now()
	// The load's session only: the operations run with the server's settings.
	growthExec(ctx, b, conn, "SET synchronous_commit = off", "SET work_mem = '256MB'",
		"SET maintenance_work_mem = '1GB'", "SET timezone = 'UTC'")
	schema := schemaOf(ctx, b, conn)
	restore := dropSecondaryIndexes(ctx, b, conn)
	big := writeGrowthTables(ctx, b, conn, n)
	loaded := time.Now()
	growthExec(ctx, b, conn, restore...)
	if got := schemaOf(ctx, b, conn); got != schema {
		b.Fatalf("schema after the load differs from the migrated one:\n%s\nwant:\n%s", got, schema)
	}
	indexed := time.Now()
	// The checkpoint writes the load out before anything is measured, so
	// that no operation shares the disk with it.
	growthExec(ctx, b, conn, "VACUUM ANALYZE packet_pool", "VACUUM ANALYZE claims", "VACUUM ANALYZE envelopes", "VACUUM ANALYZE split_commitments", "CHECKPOINT")
	b.Logf("ledger of %d packets: rows %s, indexes %s, vacuum %s", n, loaded.Sub(start).Round(time.Second),
		indexed.Sub(loaded).Round(time.Second), time.Since(indexed).Round(time.Second))
	l := &growthLedger{s: pgstore.New(pool), size: n, url: url, pool: pool, big: big}
	l.user, l.sender = deepestKeys(ctx, pool, "probe-user", "probe-sender")
	if l.user.id == 0 || l.sender.id == 0 {
		b.Fatal("no deep page of the probe user or sender")
	}
	return l
}

// schemaOf is every index and constraint of the schema with its comment.
func schemaOf(ctx context.Context, b *testing.B, conn *pgx.Conn) string {
	var s string
	err := conn.QueryRow(ctx, `SELECT
		(SELECT string_agg(indexname || ' ' || indexdef || ' ' || coalesce(obj_description(format('%I', indexname)::regclass, 'pg_class'), ''),
		                   E'\n' ORDER BY indexname) FROM pg_indexes WHERE schemaname = 'public') || E'\n' ||
		(SELECT string_agg(conname || ' ' || pg_get_constraintdef(oid) || ' ' || coalesce(obj_description(oid, 'pg_constraint'), ''),
		                   E'\n' ORDER BY conname) FROM pg_constraint WHERE connamespace = 'public'::regnamespace)`).Scan(&s)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// dropSecondaryIndexes drops every index of packet_pool, claims and envelopes but their
// primary keys (written in key order by the load, cheaply) and returns the
// statements that make them again as the migrations left them, comments
// included: building an index once is several times faster than loading
// the rows through it.
func dropSecondaryIndexes(ctx context.Context, b *testing.B, conn *pgx.Conn) []string {
	rows, err := conn.Query(ctx, `SELECT
		CASE WHEN c.oid IS NULL THEN format('DROP INDEX %s', i.indexrelid::regclass)
		     ELSE format('ALTER TABLE %s DROP CONSTRAINT %I', i.indrelid::regclass, c.conname) END,
		CASE WHEN c.oid IS NULL THEN pg_get_indexdef(i.indexrelid)
		     ELSE format('ALTER TABLE %s ADD CONSTRAINT %I %s', i.indrelid::regclass, c.conname, pg_get_constraintdef(c.oid)) END,
		format('COMMENT ON INDEX %s IS %L', i.indexrelid::regclass, obj_description(i.indexrelid, 'pg_class')),
		CASE WHEN c.oid IS NULL THEN ''
		     ELSE format('COMMENT ON CONSTRAINT %I ON %s IS %L', c.conname, i.indrelid::regclass, obj_description(c.oid, 'pg_constraint')) END
		FROM pg_index i
		LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.conrelid = i.indrelid AND c.contype IN ('u', 'x')
		WHERE i.indrelid IN ('packet_pool'::regclass, 'claims'::regclass, 'envelopes'::regclass) AND NOT i.indisprimary`)
	if err != nil {
		b.Fatal(err)
	}
	var drops, restore []string
	for rows.Next() {
		var drop, create, comment, conComment string
		if err := rows.Scan(&drop, &create, &comment, &conComment); err != nil {
			b.Fatal(err)
		}
		drops = append(drops, drop)
		restore = append(restore, create, comment)
		if conComment != "" {
			restore = append(restore, conComment)
		}
	}
	if rows.Err() != nil {
		b.Fatal(rows.Err())
	}
	growthExec(ctx, b, conn, drops...)
	return restore
}

func growthExec(ctx context.Context, b *testing.B, conn *pgx.Conn, sqls ...string) {
	for _, q := range sqls {
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
}

// Probe rows, the same in every ledger: what the reads page through.
const (
	probeEnvelopes = 2000   // probe-sender's, of 10 packets, one claimed by probe-user
	probeBig       = 20_000 // claims of the large probe envelope
	growthChunk    = 500_000
)

// growthChunkSQL writes the envelopes $1..$2 with their packets. The ledger
// is a year of envelopes up to t0, $3 the last, $4 apart in id, $5 the
// first one's time, $6 the seconds between two. Envelope e owns the packet
// ids e*16..: background envelopes hold 5 to 15 packets (10 on average), of
// sender-(e*40503 mod 100003), claimed a second apart by users of the
// population user-(id mixed mod 1000003), distinct within an envelope; one
// in four had its last packet refunded. Every $4-th envelope (2,000 in
// all) is probe-sender's, one packet of it probe-user's; envelope $3 is the
// large probe, probe-big's, of 20,000 packets, created mid-year. All are
// settled; order numbers are the claim's day and the packet id.
const growthChunkSQL = `WITH g AS (
	SELECT e, e = $3 AS big, e < $3 AND (e - 1) % $4 = 0 AND (e - 1) / $4 < 2000 AS probe,
	       $5::timestamptz + CASE WHEN e = $3 THEN $3 / 2 ELSE e END * $6::float8 * interval '1 second' AS created
	FROM generate_series($1::bigint, $2::bigint) e
), c AS MATERIALIZED (
	SELECT e, big, probe, created, CASE WHEN big THEN 20000 WHEN probe THEN 10 ELSE 5 + e * 7 % 11 END AS cnt,
	       CASE WHEN big THEN 'probe-big' WHEN probe THEN 'probe-sender' ELSE 'sender-' || (e * 40503 % 100003) END AS sender
	FROM g
), r AS MATERIALIZED (
	SELECT x.id, c.e, 1 + x.id * 31 % 97 AS amount, x.refunded, x.at, c.created, c.sender,
	       CASE WHEN c.probe AND k = 0 THEN 'probe-user' ELSE 'user-' || (x.id % 1000003 * 2654435761 % 1000003) END AS user_id
	FROM c CROSS JOIN LATERAL generate_series(0, c.cnt - 1) k
	CROSS JOIN LATERAL (SELECT c.e * 16 + k AS id, c.created + (k + 1) * interval '1 second' AS at,
	                           NOT c.big AND NOT c.probe AND c.e % 4 = 0 AND k = c.cnt - 1 AS refunded) x
), pp AS (
	INSERT INTO packet_pool (id, envelope_id, amount_cents, refunded_at)
	SELECT r.id, r.e, r.amount, CASE WHEN r.refunded THEN r.created + interval '1 day 1 minute' END FROM r
), cc AS (
	INSERT INTO claims (envelope_id, packet_id, user_id, amount_cents, claimed_at, order_no, sender_id)
	SELECT r.e, r.id, r.user_id, r.amount, r.at, to_char(r.at, 'YYYYMMDD') || lpad(r.id::text, 10, '0'), r.sender
	FROM r WHERE NOT r.refunded
), t AS (
	SELECT r.e AS envelope_id, sum(r.amount)::bigint AS total, count(*)::int AS n,
	       coalesce(sum(r.amount) FILTER (WHERE NOT r.refunded), 0)::bigint AS claimed
	FROM r GROUP BY r.e
)
INSERT INTO envelopes (id, shard, share_code, sender_id, total_cents, count, status, created_at, expires_at,
                       settled_at, claimed_cents, refunded_cents)
SELECT c.e, c.e % 16, lpad(c.e::text, 11, '0'), c.sender, t.total, t.n, 'settled', c.created, c.created + interval '1 day', c.created + interval '1 day 1 minute',
       t.claimed, t.total - t.claimed
FROM c JOIN t ON t.envelope_id = c.e`

// writeGrowthTables writes a ledger of about n packets besides the probe
// rows (see growthChunkSQL), with a split commitment per envelope, in
// chunks of growthChunk envelopes, and returns the large probe's id.
func writeGrowthTables(ctx context.Context, b *testing.B, conn *pgx.Conn, n int64) int64 {
	envelopes := n/10 + probeEnvelopes
	big := envelopes + 1
	const year = 365 * 24 * time.Hour
	step := year.Seconds() / float64(envelopes)
	for lo := int64(1); lo <= big; lo += growthChunk {
		hi := min(lo+growthChunk-1, big)
		if _, err := conn.Exec(ctx, growthChunkSQL, lo, hi, big, envelopes/probeEnvelopes, t0.Add(-year), step); err != nil {
			b.Fatalf("envelopes %d..%d: %v", lo, hi, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO split_commitments (envelope_id, salt, commitment)
			SELECT e, md5(e::text) || md5('s' || e), md5('c' || e) || md5('d' || e) FROM generate_series($1::bigint, $2::bigint) e`,
			lo, hi); err != nil {
			b.Fatalf("split commitments %d..%d: %v", lo, hi, err)
		}
	}
	return big
}
