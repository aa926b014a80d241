package pgstore_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"redpacket/internal/envelope"
	"redpacket/internal/pgstore"
)

func TestInsertEnvelope(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	code := "300517" + "12345"
	e := pgstore.Envelope{
		ID: 1001, Shard: 9, ShareCode: &code, SenderID: "alice", TotalCents: 100, Count: 4,
		CreatedAt: t0, ExpiresAt: t0.Add(time.Hour),
	}
	amounts := []int64{10, 40, 1, 49}
	if err := s.InsertEnvelope(ctx, e, 5000, amounts); err != nil {
		t.Fatal(err)
	}
	got := readEnvelope(t, s, 1001)
	if got.ShareCode == nil || *got.ShareCode != code {
		t.Errorf("share code %v, want %q", got.ShareCode, code)
	}
	got.ShareCode = nil
	want := e
	want.ShareCode, want.Status, want.Kind, want.Metadata = nil, "loading", envelope.KindRandom, []byte("{}")
	if !got.CreatedAt.Equal(want.CreatedAt) || !got.ExpiresAt.Equal(want.ExpiresAt) {
		t.Errorf("times %v / %v, want %v / %v", got.CreatedAt, got.ExpiresAt, want.CreatedAt, want.ExpiresAt)
	}
	got.CreatedAt, got.ExpiresAt, want.CreatedAt, want.ExpiresAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("envelope = %+v, want %+v", got, want)
	}
	rows, err := pool.Query(ctx, `SELECT id, amount_cents FROM packets WHERE envelope_id = 1001
		AND claimed_by IS NULL AND claimed_at IS NULL AND refunded_at IS NULL AND order_no IS NULL ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var ids, amts []int64
	for rows.Next() {
		var id, a int64
		if err := rows.Scan(&id, &a); err != nil {
			t.Fatal(err)
		}
		ids, amts = append(ids, id), append(amts, a)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if !slices.Equal(ids, []int64{5000, 5001, 5002, 5003}) || !slices.Equal(amts, amounts) {
		t.Errorf("packets %v %v, want ids 5000..5003 with %v", ids, amts, amounts)
	}
	if sum := count(t, pool, `SELECT sum(amount_cents) FROM packets WHERE envelope_id = 1001`); sum != 100 {
		t.Errorf("packets sum to %d, want 100", sum)
	}
}

func TestInsertEnvelopeAtomic(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	insert(t, s, 1, 100, []int64{5, 5}, t0)

	// The same envelope id again: fails, and none of its packets stay.
	dup := pgstore.Envelope{ID: 1, Shard: 1, SenderID: "bob", TotalCents: 9, Count: 3, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := s.InsertEnvelope(ctx, dup, 200, []int64{3, 3, 3}); err == nil {
		t.Fatalf("duplicate envelope id inserted")
	}
	if n := count(t, pool, `SELECT count(*) FROM packets WHERE id >= 200`); n != 0 {
		t.Errorf("%d packets of the failed insert remain", n)
	}
	if e := readEnvelope(t, s, 1); e.SenderID != "sender-1" || e.TotalCents != 10 {
		t.Errorf("first envelope changed: %+v", e)
	}

	// A new envelope whose packet ids collide: the COPY fails, and the
	// envelope row goes with it.
	clash := pgstore.Envelope{ID: 2, Shard: 2, SenderID: "bob", TotalCents: 9, Count: 3, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := s.InsertEnvelope(ctx, clash, 99, []int64{3, 3, 3}); err == nil {
		t.Fatalf("colliding packet ids inserted")
	}
	if _, err := s.Envelope(ctx, 2); !errors.Is(err, pgstore.ErrNotFound) {
		t.Errorf("envelope of a failed insert: %v, want ErrNotFound", err)
	}
	if n := count(t, pool, `SELECT count(*) FROM packets`); n != 2 {
		t.Errorf("%d packets in all, want 2", n)
	}

	// A duplicate share code fails the same way.
	code := "code-1"
	a := pgstore.Envelope{ID: 3, Shard: 3, ShareCode: &code, SenderID: "c", TotalCents: 1, Count: 1, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := s.InsertEnvelope(ctx, a, 300, []int64{1}); err != nil {
		t.Fatal(err)
	}
	a.ID = 4
	if err := s.InsertEnvelope(ctx, a, 400, []int64{1}); err == nil {
		t.Errorf("duplicate share code inserted")
	}
	if n := count(t, pool, `SELECT count(*) FROM packets WHERE envelope_id = 4`); n != 0 {
		t.Errorf("%d packets of the failed insert remain", n)
	}
}

func TestMarkLoaded(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	insert(t, s, 1, 100, []int64{5, 6, 7}, t0)
	if e := readEnvelope(t, s, 1); e.Status != "loading" {
		t.Fatalf("status %q before MarkLoaded", e.Status)
	}
	for range 2 {
		status, err := s.MarkLoaded(ctx, 1)
		if err != nil || status != "open" {
			t.Fatalf("MarkLoaded = %q, %v; want open", status, err)
		}
		if e := readEnvelope(t, s, 1); e.Status != "open" {
			t.Errorf("status %q after MarkLoaded", e.Status)
		}
	}

	// Every packet grabbed and flushed while still loading: sold out.
	insert(t, s, 2, 200, []int64{5, 6}, t0)
	res, err := s.ApplyClaims(ctx, []pgstore.Claim{claim(2, 200, "a"), claim(2, 201, "b")})
	if err != nil || res.Applied != 2 || len(res.SoldOut) != 0 {
		t.Fatalf("ApplyClaims = %+v, %v; want 2 applied, none sold out while loading", res, err)
	}
	if e := readEnvelope(t, s, 2); e.Status != "loading" || e.ClaimedCents != 11 {
		t.Fatalf("envelope after claims: %q with %d cents, want loading with 11", e.Status, e.ClaimedCents)
	}
	for range 2 {
		status, err := s.MarkLoaded(ctx, 2)
		if err != nil || status != "sold_out" {
			t.Errorf("MarkLoaded of a fully claimed envelope = %q, %v; want sold_out", status, err)
		}
	}

	// Any status but loading is left alone.
	insert(t, s, 3, 300, []int64{5}, t0)
	for _, st := range []envelope.Status{envelope.StatusExpired, envelope.StatusSettled, envelope.StatusSuspended} {
		if _, err := pool.Exec(ctx, `UPDATE envelopes SET status = $1 WHERE id = 3`, st); err != nil {
			t.Fatal(err)
		}
		if status, err := s.MarkLoaded(ctx, 3); err != nil || status != st {
			t.Errorf("MarkLoaded of a %s envelope = %q, %v", st, status, err)
		}
	}

	if _, err := s.MarkLoaded(ctx, 404); !errors.Is(err, pgstore.ErrNotFound) {
		t.Errorf("MarkLoaded(unknown) = %v, want ErrNotFound", err)
	}
}

func TestEnvelopeNotFound(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	if _, err := s.Envelope(t.Context(), 404); !errors.Is(err, pgstore.ErrNotFound) {
		t.Errorf("Envelope(unknown) = %v, want ErrNotFound", err)
	}
}

func TestClaimedCountAndUnclaimed(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	f := open(t, s, 1, 100, []int64{1, 2, 3, 4, 5})
	open(t, s, 2, 200, []int64{9, 9})

	n, err := s.ClaimedCount(ctx, 1)
	if err != nil || n != 0 {
		t.Errorf("ClaimedCount before claims = %d, %v", n, err)
	}
	ids, amounts, err := s.UnclaimedPackets(ctx, 1)
	if err != nil || !slices.Equal(ids, []int64{100, 101, 102, 103, 104}) || !slices.Equal(amounts, f.Amounts) {
		t.Errorf("UnclaimedPackets = %v %v, %v", ids, amounts, err)
	}

	if _, err := s.ApplyClaims(ctx, []pgstore.Claim{claim(1, 101, "a"), claim(1, 103, "b"), claim(2, 200, "a")}); err != nil {
		t.Fatal(err)
	}
	// A refunded packet is neither claimed nor unclaimed.
	if _, err := pool.Exec(ctx, `UPDATE packets SET refunded_at = now() WHERE id = 104`); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ClaimedCount(ctx, 1); err != nil || n != 2 {
		t.Errorf("ClaimedCount = %d, %v; want 2", n, err)
	}
	if n, err := s.ClaimedCount(ctx, 2); err != nil || n != 1 {
		t.Errorf("ClaimedCount(2) = %d, %v; want 1", n, err)
	}
	ids, amounts, err = s.UnclaimedPackets(ctx, 1)
	if err != nil || !slices.Equal(ids, []int64{100, 102}) || !slices.Equal(amounts, []int64{1, 3}) {
		t.Errorf("UnclaimedPackets = %v %v, %v; want [100 102] [1 3]", ids, amounts, err)
	}
	if n, err := s.ClaimedCount(ctx, 404); err != nil || n != 0 {
		t.Errorf("ClaimedCount(unknown) = %d, %v", n, err)
	}
	if ids, _, err := s.UnclaimedPackets(ctx, 404); err != nil || len(ids) != 0 {
		t.Errorf("UnclaimedPackets(unknown) = %v, %v", ids, err)
	}
}

func TestLoadingEnvelopes(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	insert(t, s, 5, 500, []int64{1}, t0.Add(-3*time.Hour))
	insert(t, s, 3, 300, []int64{1}, t0.Add(-2*time.Hour))
	insert(t, s, 4, 400, []int64{1}, t0.Add(-time.Hour))
	insert(t, s, 6, 600, []int64{1}, t0) // not before t0
	insert(t, s, 1, 100, []int64{1}, t0.Add(-4*time.Hour))
	if _, err := s.MarkLoaded(ctx, 1); err != nil { // old, but open
		t.Fatal(err)
	}
	ids := func(es []pgstore.Envelope) []int64 {
		out := make([]int64, len(es))
		for i, e := range es {
			out[i] = e.ID
			if e.Status != "loading" {
				t.Errorf("envelope %d listed with status %q", e.ID, e.Status)
			}
		}
		return out
	}
	all := make([]int, 16)
	for i := range all {
		all[i] = i
	}
	for _, c := range []struct {
		shards []int
		before time.Time
		limit  int
		want   []int64
	}{
		{all, t0, 10, []int64{3, 4, 5}},
		{all, t0, 2, []int64{3, 4}},
		{all, t0.Add(time.Nanosecond * 1000), 10, []int64{3, 4, 5, 6}},
		{all, t0.Add(-time.Hour), 10, []int64{3, 5}},
		{all, t0.Add(-5 * time.Hour), 10, []int64{}},
		{[]int{4, 5, 9}, t0, 10, []int64{4, 5}}, // only the shards held
	} {
		es, err := s.LoadingEnvelopesIn(ctx, c.shards, c.before, c.limit)
		if err != nil || !slices.Equal(ids(es), c.want) {
			t.Errorf("LoadingEnvelopesIn(%v, %v, %d) = %v, %v; want %v", c.shards, c.before, c.limit, ids(es), err, c.want)
		}
	}
	es, err := s.LoadingEnvelopesIn(ctx, all, t0, 1)
	if err != nil || len(es) != 1 || es[0].TotalCents != 1 || es[0].Count != 1 || !es[0].CreatedAt.Equal(t0.Add(-2*time.Hour)) {
		t.Errorf("LoadingEnvelopes row = %+v, %v", es, err)
	}
}

// The split's commitment is written in the envelope's transaction: an
// envelope refused (here its share code is taken) leaves no commitment of
// an envelope that does not exist, and a written one has its own.
func TestRefusedEnvelopeLeavesNoCommitment(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	code := "300517" + "00001"
	write := func(id int64) error {
		e := pgstore.Envelope{ID: id, Shard: 1, ShareCode: &code, SenderID: "s", TotalCents: 10, Count: 1,
			CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
		commit := envelope.CommitSplit(envelope.HandOutOrder(100*id, []int64{10}))
		return s.InsertEnvelopeFor(ctx, e, pgstore.NewEnvelope{FirstPacketID: 100 * id, Amounts: []int64{10}, Split: &commit})
	}
	if err := write(1); err != nil {
		t.Fatal(err)
	}
	if err := write(2); !errors.Is(err, pgstore.ErrShareCodeTaken) {
		t.Fatalf("second envelope with the same share code: %v, want ErrShareCodeTaken", err)
	}
	for id, want := range map[int64]int{1: 1, 2: 0} {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM split_commitments WHERE envelope_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("envelope %d has %d commitments, want %d", id, n, want)
		}
	}
}

// A prune of expired idempotency keys never deletes a key a create is
// taking over (the expired row given a new envelope and expiry, not yet
// committed): once that create commits, its key stands, so a retry of it
// finds its envelope rather than making a second one.
func TestPruneSparesAKeyBeingTakenOver(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, `INSERT INTO idempotency_keys (client_name, idem_key, request_sha256, envelope_id, created_at, expires_at)
		VALUES ('c', 'k', decode(repeat('00', 32), 'hex'), 1, $1, $2)`, t0.Add(-2*time.Hour), t0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `UPDATE idempotency_keys SET envelope_id = 2, created_at = $1, expires_at = $2
		WHERE client_name = 'c' AND idem_key = 'k'`, t0, t0.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	pruned := make(chan error, 1)
	go func() {
		_, err := s.PruneIdempotencyKeys(ctx, t0, 16)
		pruned <- err
	}()
	time.Sleep(200 * time.Millisecond) // the prune finds the row locked (or waits on it)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-pruned; err != nil {
		t.Fatal(err)
	}
	var envelope int64
	if err := pool.QueryRow(ctx, `SELECT envelope_id FROM idempotency_keys WHERE client_name = 'c' AND idem_key = 'k'`).Scan(&envelope); err != nil || envelope != 2 {
		t.Errorf("the key taken over: envelope %d, %v; want it kept for envelope 2", envelope, err)
	}
}
