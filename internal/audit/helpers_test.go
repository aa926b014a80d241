package audit

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"redpacket/internal/ids"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// shards is the shard count of the test key builder (the migrated default).
const shards = 16

// db is one test's database and Redis prefix, with builders that write
// envelopes in plain SQL (and Redis state through redisstore's load and grab
// scripts), so the audit is tested against the schema and key layout only.
type db struct {
	t     *testing.T
	ctx   context.Context
	pool  *pgxpool.Pool
	rdb   redis.UniversalClient
	store *redisstore.Store
	keys  redisstore.Keys
	// grabs counts grabs per envelope, for distinct users.
	grabs map[int64]int
}

func newDB(t *testing.T) *db {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	pool, _ := testenv.Postgres(t)
	rdb, prefix := testenv.Redis(t)
	store := redisstore.New(rdb, prefix, shards)
	t.Cleanup(ids.NewOrderNumbers(store, pgstore.New(pool), ids.OrderConfig{}).Close)
	return &db{t: t, ctx: ctx, pool: pool, rdb: rdb, store: store, keys: store.Keys(), grabs: map[int64]int{}}
}

// run audits with Redis.
func (d *db) run(o Options) Report {
	d.t.Helper()
	o.Redis, o.Keys = d.rdb, d.keys
	return d.runPG(o)
}

// runPG audits with the options as given.
func (d *db) runPG(o Options) Report {
	d.t.Helper()
	rep, err := Run(d.ctx, d.pool, o)
	if err != nil {
		d.t.Fatalf("Run: %v", err)
	}
	return rep
}

func (d *db) exec(sql string, args ...any) {
	d.t.Helper()
	if _, err := d.pool.Exec(d.ctx, sql, args...); err != nil {
		d.t.Fatalf("%s: %v", sql, err)
	}
}

// packet is the id of an envelope's i-th packet.
func packet(envelope int64, i int) int64 { return envelope*100 + int64(i) }

func sum(amounts []int64) int64 {
	var s int64
	for _, a := range amounts {
		s += a
	}
	return s
}

// insert writes an envelope with unclaimed packets of the amounts.
func (d *db) insert(id int64, status string, created time.Time, amounts ...int64) {
	d.t.Helper()
	d.exec(`INSERT INTO envelopes (id, shard, sender_id, total_cents, count, status, created_at, expires_at)
		VALUES ($1, $2, 'sender', $3, $4, $5, $6::timestamptz, $6::timestamptz + interval '1 day')`,
		id, id%shards, sum(amounts), len(amounts), status, created)
	d.exec(`INSERT INTO packets (id, envelope_id, amount_cents)
		SELECT $1 * 100 + i - 1, $1, a FROM unnest($2::bigint[]) WITH ORDINALITY AS t(a, i)`, id, amounts)
}

// claim records in PostgreSQL that user holds the packet, as the flusher does.
func (d *db) claim(envelope, packetID int64, user string) {
	d.t.Helper()
	d.exec(`WITH p AS (
		    UPDATE packets SET claimed_by = $3, claimed_at = now()
		    WHERE id = $2 AND envelope_id = $1 RETURNING amount_cents)
		UPDATE envelopes SET claimed_cents = claimed_cents + (SELECT sum(amount_cents) FROM p)
		WHERE id = $1 AND EXISTS (SELECT 1 FROM p)`, envelope, packetID, user)
}

// claimFirst claims the envelope's first n packets for users u0, u1, ...
func (d *db) claimFirst(id int64, n int) {
	d.t.Helper()
	for i := range n {
		d.claim(id, packet(id, i), "u"+strconv.Itoa(i))
	}
}

// settle refunds every unclaimed packet and gives the envelope its final status.
func (d *db) settle(id int64, status string) {
	d.t.Helper()
	d.exec(`WITH r AS (
		    UPDATE packets SET refunded_at = now()
		    WHERE envelope_id = $1 AND claimed_by IS NULL AND refunded_at IS NULL RETURNING amount_cents)
		UPDATE envelopes SET refunded_cents = refunded_cents + (SELECT coalesce(sum(amount_cents), 0) FROM r),
		    status = $2, settled_at = now()
		WHERE id = $1`, id, status)
}

func (d *db) setStatus(id int64, status string) {
	d.t.Helper()
	d.exec(`UPDATE envelopes SET status = $2 WHERE id = $1`, id, status)
}

// settled is a settled envelope whose first claimed packets were claimed.
func (d *db) settled(id int64, created time.Time, claimed int, amounts ...int64) {
	d.t.Helper()
	d.insert(id, "expired", created, amounts...)
	d.claimFirst(id, claimed)
	d.settle(id, "settled")
}

// soldOut is a sold-out envelope (Redis state not kept).
func (d *db) soldOut(id int64, created time.Time, amounts ...int64) {
	d.t.Helper()
	d.insert(id, "open", created, amounts...)
	d.claimFirst(id, len(amounts))
	d.setStatus(id, "sold_out")
}

// failed is an envelope given up while loading: everything refunded.
func (d *db) failed(id int64, created time.Time, amounts ...int64) {
	d.t.Helper()
	d.insert(id, "loading", created, amounts...)
	d.settle(id, "failed")
}

// live is an envelope loaded into Redis, grabbed grabs times there, of which
// the first flushed are in PostgreSQL.
func (d *db) live(id int64, status string, grabs, flushed int, amounts ...int64) {
	d.t.Helper()
	d.insert(id, status, time.Now(), amounts...)
	packets := make([]redisstore.Packet, len(amounts))
	for i, a := range amounts {
		packets[i] = redisstore.Packet{ID: packet(id, i), AmountCents: a}
	}
	if _, err := d.store.LoadEnvelope(d.ctx, id, time.Now().Add(time.Hour), sum(amounts), packets); err != nil {
		d.t.Fatal(err)
	}
	for i := range grabs {
		user, c := d.grab(id)
		if i < flushed {
			d.claim(id, c.PacketID, user)
		}
	}
}

// grab takes a packet in Redis for a new user.
func (d *db) grab(id int64) (string, redisstore.Claim) {
	d.t.Helper()
	n := d.grabs[id]
	d.grabs[id] = n + 1
	user := fmt.Sprintf("u%d", n)
	c, err := d.store.Grab(d.ctx, id, user, time.Now())
	if err != nil {
		d.t.Fatalf("grab envelope %d for %s: %v", id, user, err)
	}
	return user, c
}

// conflict records a claim the flusher could not apply, found at found.
func (d *db) conflict(envelope, packetID int64, user string, found time.Time) {
	d.t.Helper()
	d.exec(`INSERT INTO claim_conflicts (envelope_id, packet_id, user_id, claimed_at, reason, found_at)
		VALUES ($1, $2, $3, $4, 'claimed_by_another_user', $4)`, envelope, packetID, user, found)
}

// found lists violations as "envelope:check", sorted, for comparison.
func found(vs []Violation) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, fmt.Sprintf("%d:%s", v.EnvelopeID, v.Check))
	}
	slices.Sort(out)
	return out
}

// want builds the sorted "envelope:check" list found returns.
func want(pairs map[int64][]string) []string {
	out := []string{}
	for id, checks := range pairs {
		for _, c := range checks {
			out = append(out, fmt.Sprintf("%d:%s", id, c))
		}
	}
	slices.Sort(out)
	return out
}

func assertViolations(t *testing.T, rep Report, pairs map[int64][]string) {
	t.Helper()
	if got, w := found(rep.Violations), want(pairs); !slices.Equal(got, w) {
		t.Errorf("violations:\n got  %v\n want %v", got, w)
		for _, v := range rep.Violations {
			t.Logf("  %d %s: %s", v.EnvelopeID, v.Check, v.Detail)
		}
	}
}
