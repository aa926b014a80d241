package pgstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/pgstore"
)

// BenchmarkClaimDesigns measures, in one run, the shipped claim write
// against designs where claims are appended to a table of their own and
// packets never change after creation, each against a same-run COPY of as
// many claim-shaped rows. Nothing of the prototypes ships: their tables live
// only in the benchmark's database, to tell what a redesign would gain.
//
//   - shipped: the shipped ApplyClaims (claims COPYed and checked against
//     their packets, a run of claim events per envelope). The designs below were its prototypes; the figures of the
//     update design it replaced, of positions on the packet rows and of an
//     event row per claim (migration 16) are in BENCHMARKS.md.
//   - shipped-no-events: the same with the statement after the COPY cut
//     before its events (the runs and the sold-out rows).
//   - shipped-pipelined: ApplyClaimsInChunks, two batches at a time, each
//     in a transaction on a connection of its own: their COPYs run at once,
//     and the second batch's goes on while the first sends its statement
//     and commits; they still commit in order.
//   - append-guarded[+events]: INSERT ... SELECT FROM unnest ... ON
//     CONFLICT DO NOTHING into a claims table with the indexes the claimed
//     packet row has today (primary key, unique (envelope_id, user_id),
//     unique order number, a user's history, by time, an envelope's claims),
//     each claim checked against its packet, the envelope's sums and best
//     kept in the same statement; with or without an event row per claim in
//     events (without: what a design reading claim events from the claims
//     would write).
//   - append-trusting[+events]: the same with a plain INSERT, trusting the
//     batch as the shipped statement does: a batch only a Redis that lost
//     state produces (or a replay after a crash) would be refused by the
//     unique indexes and sent again guarded.
//   - append-lean[-guarded]: trusting (or guarded), no event rows, into a
//     claims table with one read index fewer and one made cheap: the primary
//     key (envelope_id, packet_id) serves an envelope's claims list in
//     place of its own index (a packet id still names one claim: the join
//     ties it to its envelope), and by-time queries use a BRIN index, since
//     appended claims arrive in time order.
//   - copy-lean: the lean table written with COPY, trusting the batch
//     whole: the amounts come with the claims (the grab knows them), the
//     envelope's sums are added by one UPDATE per batch, and nothing is
//     checked against the packets (a settlement would compare the sums).
//   - copy-lean+events: copy-lean with an event row per claim, COPYed
//     too, at positions taken from the locked sequence in the same
//     transaction: whether claim events can stay rows of events.
//   - copy-lean+positions: copy-lean with each claim's event position on
//     its row under a BRIN index (the heap is in position order): claim
//     events read from the claims, the redesign's first three steps;
//     -btree: the same under a unique B-tree index, which rising
//     positions fill at its right edge.
//   - insert: INSERT ... SELECT FROM unnest of the rows alone into a table
//     shaped as the COPY reference: what SQL costs over COPY, nothing more.
//
// After the rounds it reads feed pages (feedPages): 100 claim events by
// position from copy-lean+positions's BRIN index, from the B-tree of
// copy-lean+positions-btree and from the shipped feed (EventsAfter):
// feed-page-brin-us, feed-page-btree-us and feed-page-shipped-us.
//
// Each round writes 100,000 claims of fresh envelopes in batches of 2,000
// with each design, then COPYs 100,000 rows; ratio-X is X's claims a second
// over COPY's rows a second, summed over the rounds.
func BenchmarkClaimDesigns(b *testing.B) {
	const perRound, batchSize = 100_000, 2_000
	s, pool := newStore(b)
	ctx := b.Context()
	for _, q := range protoSchema {
		if _, err := pool.Exec(ctx, q); err != nil {
			b.Fatalf("%v\n%s", err, q)
		}
	}
	// shipped-pipelined writes two batches at a time, as a flusher taking
	// two transactions' worth does; finishers write what a design left
	// pending at the end of a round, returning how many claims that was.
	var pending []pgstore.Claim
	pipelined := func(ctx context.Context, c []pgstore.Claim) (int, error) {
		if pending == nil {
			pending = c
			return len(c), nil
		}
		res, err := s.ApplyClaimsInChunks(ctx, append(pending, c...), len(c), 2)
		pending = nil
		return res.Applied / 2, err
	}
	finishers := map[string]func(context.Context) (int, error){"shipped-pipelined": func(ctx context.Context) (int, error) {
		if pending == nil {
			return batchSize, nil
		}
		res, err := s.ApplyClaims(ctx, pending)
		pending = nil
		return res.Applied, err
	}}
	designs := []struct {
		name  string
		apply func(context.Context, []pgstore.Claim) (int, error)
	}{
		{"shipped", func(ctx context.Context, c []pgstore.Claim) (int, error) {
			res, err := s.ApplyClaims(ctx, c)
			return res.Applied, err
		}},
		{"shipped-pipelined", pipelined},
		{"shipped-no-events", s.ApplyClaimsWithoutEvents},
		{"append-guarded+events", protoDesign(pool, "proto_claims_ge", true, true)},
		{"append-guarded", protoDesign(pool, "proto_claims_g", true, false)},
		{"append-trusting+events", protoDesign(pool, "proto_claims_te", false, true)},
		{"append-trusting", protoDesign(pool, "proto_claims_t", false, false)},
		{"append-lean", protoDesign(pool, "proto_claims_lean", false, false)},
		{"append-lean-guarded", protoDesign(pool, "proto_claims_leang", true, false)},
		{"copy-lean", func(ctx context.Context, c []pgstore.Claim) (int, error) {
			return protoCopy(ctx, pool, "proto_claims_copy", c, copyPlain)
		}},
		{"copy-lean+events", func(ctx context.Context, c []pgstore.Claim) (int, error) {
			return protoCopy(ctx, pool, "proto_claims_copye", c, copyEvents)
		}},
		{"copy-lean+positions", func(ctx context.Context, c []pgstore.Claim) (int, error) {
			return protoCopy(ctx, pool, "proto_claims_copyp", c, copyPositions)
		}},
		{"copy-lean+positions-btree", func(ctx context.Context, c []pgstore.Claim) (int, error) {
			return protoCopy(ctx, pool, "proto_claims_copypb", c, copyPositions)
		}},
		{"insert", func(ctx context.Context, c []pgstore.Claim) (int, error) {
			return protoRun(ctx, pool, protoInsert, c)
		}},
	}
	spent := make([]time.Duration, len(designs))
	var copied time.Duration
	env := int64(0)
	for round := range b.N {
		for d, design := range designs {
			env++
			first := env * 10_000_000
			if strings.HasPrefix(design.name, "shipped") {
				insert(b, s, env, first, amountsOf(perRound), t0)
				if _, err := s.MarkLoaded(ctx, env); err != nil {
					b.Fatal(err)
				}
			} else {
				protoEnvelope(b, pool, env, first, perRound)
			}
			start := time.Now()
			for from := 0; from < perRound; from += batchSize {
				batch := make([]pgstore.Claim, batchSize)
				for i := range batch {
					p := first + int64(from+i)
					batch[i] = benchClaim(env, p, "u"+strconv.FormatInt(p, 10))
					batch[i].OrderNo = strconv.FormatInt(20261127_0000000000+p, 10)
				}
				n, err := design.apply(ctx, batch)
				if err != nil || n != batchSize {
					b.Fatalf("%s: applied %d of %d: %v", design.name, n, batchSize, err)
				}
			}
			if finish := finishers[design.name]; finish != nil {
				if n, err := finish(ctx); err != nil || n != batchSize {
					b.Fatalf("%s: the last batch applied %d of %d: %v", design.name, n, batchSize, err)
				}
			}
			spent[d] += time.Since(start)
		}
		copied += copyReference(b, pool, round, perRound)
	}
	brinPage, btreePage, shippedPage := feedPages(b, pool, 200)
	b.ReportMetric(float64(brinPage.Microseconds()), "feed-page-brin-us")
	b.ReportMetric(float64(btreePage.Microseconds()), "feed-page-btree-us")
	b.ReportMetric(float64(shippedPage.Microseconds()), "feed-page-shipped-us")
	copyRate := float64(b.N*perRound) / copied.Seconds()
	for d, design := range designs {
		b.ReportMetric(float64(b.N*perRound)/spent[d].Seconds()/copyRate, "ratio-"+design.name)
	}
	b.ReportMetric(copyRate, "copy-rows/s")
	b.ReportMetric(0, "ns/op")
}

// amountsOf is the packet amounts of the benchmarks' envelopes of n packets.
func amountsOf(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(1 + i%97)
	}
	return out
}

// protoClaimsTable is a prototype claims table: the columns of a claim and
// the indexes the claimed packet row has today.
const protoClaimsTable = `CREATE TABLE {table} (packet_id bigint PRIMARY KEY, envelope_id bigint NOT NULL,
	user_id text NOT NULL, amount_cents bigint NOT NULL, claimed_at timestamptz NOT NULL, order_no text UNIQUE,
	UNIQUE (envelope_id, user_id));
CREATE INDEX ON {table} (user_id, claimed_at, packet_id);
CREATE INDEX ON {table} (claimed_at);
CREATE INDEX ON {table} (envelope_id, packet_id)`

// protoLeanTable is protoClaimsTable with the envelope's claims served by
// the primary key and the by-time index a BRIN one.
const protoLeanTable = `CREATE TABLE {table} (packet_id bigint NOT NULL, envelope_id bigint NOT NULL,
	user_id text NOT NULL, amount_cents bigint NOT NULL, claimed_at timestamptz NOT NULL, order_no text UNIQUE,
	PRIMARY KEY (envelope_id, packet_id), UNIQUE (envelope_id, user_id));
CREATE INDEX ON {table} (user_id, claimed_at, packet_id);
CREATE INDEX ON {table} USING brin (claimed_at)`

// protoSchema is the prototypes' tables and the COPY reference.
var protoSchema = []string{
	`CREATE TABLE proto_envelopes (id bigint PRIMARY KEY, total_cents bigint NOT NULL,
		claimed_cents bigint NOT NULL DEFAULT 0, status text NOT NULL, best_packet_id bigint, best_amount_cents bigint)`,
	`CREATE TABLE proto_packets (id bigint PRIMARY KEY, envelope_id bigint NOT NULL, amount_cents bigint NOT NULL,
		refunded_at timestamptz)`,
	`CREATE INDEX ON proto_packets (envelope_id)`,
	tableOf("proto_claims_ge"),
	tableOf("proto_claims_g"),
	tableOf("proto_claims_te"),
	tableOf("proto_claims_t"),
	strings.ReplaceAll(protoLeanTable, "{table}", "proto_claims_lean"),
	strings.ReplaceAll(protoLeanTable, "{table}", "proto_claims_leang"),
	strings.ReplaceAll(protoLeanTable, "{table}", "proto_claims_copy"),
	strings.ReplaceAll(protoLeanTable, "{table}", "proto_claims_copye"),
	strings.ReplaceAll(protoLeanTable, "{table}", "proto_claims_copyp"),
	`ALTER TABLE proto_claims_copyp ADD COLUMN claim_event_id bigint NOT NULL`,
	// Small ranges, summarized as each fills (by autovacuum): a feed page
	// reads a few pages, and an unsummarized range is read whole.
	`CREATE INDEX proto_claims_copyp_position_idx ON proto_claims_copyp USING brin (claim_event_id)
		WITH (pages_per_range = 16, autosummarize = on)`,
	strings.ReplaceAll(protoLeanTable, "{table}", "proto_claims_copypb"),
	`ALTER TABLE proto_claims_copypb ADD COLUMN claim_event_id bigint NOT NULL`,
	`CREATE UNIQUE INDEX ON proto_claims_copypb (claim_event_id)`,
	`CREATE TABLE proto_rows (packet_id bigint PRIMARY KEY, envelope_id bigint NOT NULL,
		user_id text NOT NULL, claimed_at timestamptz NOT NULL, order_no text UNIQUE, UNIQUE (envelope_id, user_id))`,
	`CREATE TABLE copy_reference (packet_id bigint PRIMARY KEY, envelope_id bigint NOT NULL,
		user_id text NOT NULL, claimed_at timestamptz NOT NULL, order_no text UNIQUE, UNIQUE (envelope_id, user_id))`,
}

func tableOf(name string) string { return strings.ReplaceAll(protoClaimsTable, "{table}", name) }

// protoEnvelope writes a prototype envelope of n packets with COPY.
func protoEnvelope(b *testing.B, pool *pgxpool.Pool, env, first int64, n int) {
	ctx := b.Context()
	amounts := amountsOf(n)
	var total int64
	rows := make([][]any, n)
	for i, a := range amounts {
		total += a
		rows[i] = []any{first + int64(i), env, a}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO proto_envelopes (id, total_cents, status) VALUES ($1, $2, 'open')`,
		env, total); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"proto_packets"}, []string{"id", "envelope_id", "amount_cents"},
		pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
}

// copyReference COPYs n claim-shaped rows and returns how long it took.
func copyReference(b *testing.B, pool *pgxpool.Pool, round, n int) time.Duration {
	rows := make([][]any, n)
	at := time.Now()
	for j := range rows {
		id := int64(round*n + j)
		rows[j] = []any{id, int64(round), "u" + strconv.FormatInt(id, 10), at, strconv.FormatInt(20261127_0000000000+id, 10)}
	}
	start := time.Now()
	if _, err := pool.CopyFrom(b.Context(), pgx.Identifier{"copy_reference"},
		[]string{"packet_id", "envelope_id", "user_id", "claimed_at", "order_no"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// protoDesign is an append design writing into table: guarded (ON CONFLICT
// DO NOTHING) or trusting, with or without an event row per claim.
func protoDesign(pool *pgxpool.Pool, table string, guarded, events bool) func(context.Context, []pgstore.Claim) (int, error) {
	statement := protoAppend
	if !guarded {
		statement = strings.Replace(statement, "ON CONFLICT DO NOTHING", "", 1)
	}
	if events {
		statement += protoEvents
	}
	statement = strings.ReplaceAll(statement, "proto_claims", table) + `SELECT count(*)::int FROM applied`
	return func(ctx context.Context, c []pgstore.Claim) (int, error) { return protoRun(ctx, pool, statement, c) }
}

// protoRun runs a prototype statement on a batch, with the shipped claim
// transaction's planner settings.
func protoRun(ctx context.Context, pool *pgxpool.Pool, statement string, claims []pgstore.Claim) (int, error) {
	return protoRunAfter(ctx, pool, "", statement, claims)
}

// protoRunAfter is protoRun with first, when not "", run before the
// statement in the same transaction, given the batch's envelope ids.
func protoRunAfter(ctx context.Context, pool *pgxpool.Pool, first, statement string, claims []pgstore.Claim) (int, error) {
	envs, packets, users := make([]int64, len(claims)), make([]int64, len(claims)), make([]string, len(claims))
	ats, orders := make([]time.Time, len(claims)), make([]string, len(claims))
	for i, c := range claims {
		envs[i], packets[i], users[i], ats[i], orders[i] = c.EnvelopeID, c.PacketID, c.UserID, c.ClaimedAt, c.OrderNo
	}
	var n int
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('enable_seqscan', 'off', true),
			set_config('enable_mergejoin', 'off', true), set_config('enable_hashjoin', 'off', true)`); err != nil {
			return err
		}
		if first != "" {
			if _, err := tx.Exec(ctx, first, envs); err != nil {
				return err
			}
		}
		return tx.QueryRow(ctx, statement, envs, packets, users, ats, orders).Scan(&n)
	})
	return n, err
}

// copyMode is what protoCopy writes besides the claims.
type copyMode int

const (
	copyPlain     copyMode = iota // nothing
	copyEvents                    // an event row per claim, COPYed
	copyPositions                 // each claim's event position, on the claim row
)

// protoCopy COPYs a batch into table with the amounts amountsOf gave its
// packets, then adds each envelope's sum and best in one statement. With
// copyEvents it also COPYs an event row per claim, in the batch's order
// (the claims' time order), at positions reserved under the sequence's
// lock; with copyPositions each claim row carries its position instead.
func protoCopy(ctx context.Context, pool *pgxpool.Pool, table string, claims []pgstore.Claim, mode copyMode) (int, error) {
	rows := make([][]any, len(claims))
	envs, cents, bestIDs, bestCents := []int64{}, []int64{}, []int64{}, []int64{}
	for i, c := range claims {
		amount := int64(1 + (c.PacketID-c.EnvelopeID*10_000_000)%97)
		rows[i] = []any{c.PacketID, c.EnvelopeID, c.UserID, amount, c.ClaimedAt, c.OrderNo}
		last := len(envs) - 1
		if last < 0 || envs[last] != c.EnvelopeID {
			envs, cents, bestIDs, bestCents = append(envs, c.EnvelopeID), append(cents, 0), append(bestIDs, 0), append(bestCents, 0)
			last++
		}
		cents[last] += amount
		if amount > bestCents[last] || amount == bestCents[last] && c.PacketID > bestIDs[last] {
			bestIDs[last], bestCents[last] = c.PacketID, amount
		}
	}
	var n int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		columns := []string{"packet_id", "envelope_id", "user_id", "amount_cents", "claimed_at", "order_no"}
		if mode == copyPositions {
			var base int64
			if err := tx.QueryRow(ctx, `SELECT take_event_ids($1)`, len(rows)).Scan(&base); err != nil {
				return err
			}
			for i := range rows {
				rows[i] = append(rows[i], base+int64(i)+1)
			}
			columns = append(columns, "claim_event_id")
		}
		var err error
		n, err = tx.CopyFrom(ctx, pgx.Identifier{table}, columns, pgx.CopyFromRows(rows))
		if err != nil {
			return err
		}
		if mode == copyEvents {
			if err := protoCopyEvents(ctx, tx, claims); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, protoAddSums+`
			FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[]) AS t(envelope_id, cents, best_id, best_cents)
			WHERE e.id = t.envelope_id`, envs, cents, bestIDs, bestCents)
		return err
	})
	return int(n), err
}

// protoCopyEvents reserves len(claims) event positions and COPYs a
// packet.claimed event row per claim at them.
func protoCopyEvents(ctx context.Context, tx pgx.Tx, claims []pgstore.Claim) error {
	var base int64
	if err := tx.QueryRow(ctx, `SELECT take_event_ids($1)`, len(claims)).Scan(&base); err != nil {
		return err
	}
	rows := make([][]any, len(claims))
	for i, c := range claims {
		rows[i] = []any{base + int64(i) + 1, "packet.claimed", c.EnvelopeID, c.PacketID}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, []string{"id", "type", "envelope_id", "packet_id"},
		pgx.CopyFromRows(rows))
	return err
}

const protoInput = `
WITH input AS (
    SELECT * FROM ROWS FROM (unnest($1::bigint[]), unnest($2::bigint[]), unnest($3::text[]),
                             unnest($4::timestamptz[]), unnest($5::text[]))
        AS t(envelope_id, packet_id, user_id, claimed_at, order_no)
)`

// protoAppend inserts the claims whose packets exist, belong to their
// envelope and are not refunded, and keeps the envelope's sums and best. A
// WITH's data-modifying statements all run, read or not.
const protoAppend = protoInput + `, applied AS (
    INSERT INTO proto_claims (packet_id, envelope_id, user_id, amount_cents, claimed_at, order_no)
    SELECT i.packet_id, i.envelope_id, i.user_id, p.amount_cents, i.claimed_at, nullif(i.order_no, '')
    FROM input i JOIN proto_packets p ON p.id = i.packet_id
    WHERE (p.envelope_id = i.envelope_id AND p.refunded_at IS NULL) IS TRUE
    ON CONFLICT DO NOTHING
    RETURNING packet_id, envelope_id, amount_cents, claimed_at
), totals AS (
    SELECT DISTINCT ON (envelope_id) envelope_id, packet_id AS best_id, amount_cents AS best_cents,
           (sum(amount_cents) OVER w)::bigint AS cents
    FROM applied WINDOW w AS (PARTITION BY envelope_id)
    ORDER BY envelope_id, amount_cents DESC, packet_id DESC
), changed AS (
    ` + protoAddSums + `
    FROM totals t WHERE e.id = t.envelope_id
)
`

// protoAddSums adds each envelope's claimed cents (t.cents) and keeps its
// best (t.best_id, t.best_cents), for a FROM naming the totals t.
const protoAddSums = `UPDATE proto_envelopes e
    SET claimed_cents = e.claimed_cents + t.cents,
        status = CASE WHEN e.claimed_cents + t.cents = e.total_cents THEN 'sold_out' ELSE e.status END,
        best_packet_id = CASE WHEN e.best_packet_id IS NULL
                                   OR (t.best_cents, t.best_id) > (e.best_amount_cents, e.best_packet_id)
                              THEN t.best_id ELSE e.best_packet_id END,
        best_amount_cents = greatest(e.best_amount_cents, t.best_cents)`

// protoEvents writes an event row per claim, as the shipped statement does.
const protoEvents = `, event_base AS (SELECT take_event_ids(count(*)) AS base FROM applied)
, event_rows AS (
    INSERT INTO events (id, type, envelope_id, packet_id)
    SELECT b.base + row_number() OVER (ORDER BY a.claimed_at, a.packet_id), 'packet.claimed', a.envelope_id, a.packet_id
    FROM applied a CROSS JOIN event_base b
)
`

// protoInsert is the rows alone, no check and no sums.
const protoInsert = protoInput + `, applied AS (
    INSERT INTO proto_rows (packet_id, envelope_id, user_id, claimed_at, order_no)
    SELECT packet_id, envelope_id, user_id, claimed_at, order_no FROM input
    RETURNING 1
)
SELECT count(*)::int FROM applied`
