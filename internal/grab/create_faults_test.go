package grab_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/limits"
	"redpacket/internal/pgstore"
	"redpacket/internal/testenv/stack"
)

// commitLoser hands out PostgreSQL connections that, once armed, let the
// next COMMIT through to the server and lose its answer, as a network cut
// just after the commit does: the transaction is committed, the client hears
// only that the connection broke.
type commitLoser struct {
	armed atomic.Bool
	lost  atomic.Int32 // COMMITs sent whose answer is lost
	// downAfter makes PostgreSQL unreachable once an answer is lost: no new
	// connection is made.
	downAfter atomic.Bool
	down      atomic.Bool
	// early cuts the connection as soon as the COMMIT is sent, without
	// waiting for the commit to end, and lets no cancel request through,
	// as a network cut does.
	early atomic.Bool
}

// cancelRequest is how a PostgreSQL cancel request starts: its length and
// code.
var cancelRequest = []byte{0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e}

// commitQuery is a COMMIT as pgx sends it: a simple-protocol Query message.
var commitQuery = []byte("Q\x00\x00\x00\x0bcommit\x00")

func (l *commitLoser) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if l.down.Load() {
		return nil, errors.New("postgres unreachable (test)")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &losingConn{Conn: c, l: l}, nil
}

type losingConn struct {
	net.Conn
	l          *commitLoser
	committing atomic.Bool // the COMMIT whose answer is lost was sent
	dropped    atomic.Bool
}

func (c *losingConn) Write(p []byte) (int, error) {
	if c.l.early.Load() && bytes.HasPrefix(p, cancelRequest) {
		return len(p), nil // the network is cut: it never arrives
	}
	if bytes.Contains(p, commitQuery) && c.l.armed.CompareAndSwap(true, false) {
		c.l.lost.Add(1)
		c.committing.Store(true)
	}
	return c.Conn.Write(p)
}

// Read, once the COMMIT is sent, waits for the server's answer (the commit
// is then durable) and drops it with the connection.
func (c *losingConn) Read(p []byte) (int, error) {
	switch {
	case c.dropped.Load():
		return 0, io.EOF
	case !c.committing.Load():
		return c.Conn.Read(p)
	case c.l.early.Load():
		c.dropped.Store(true)
		_ = c.Close()
		return 0, io.ErrUnexpectedEOF
	}
	var got []byte
	buf := make([]byte, 512)
	for !bytes.Contains(got, []byte("COMMIT\x00")) {
		n, err := c.Conn.Read(buf)
		if err != nil {
			break
		}
		got = append(got, buf[:n]...)
	}
	c.dropped.Store(true)
	c.l.down.Store(c.l.downAfter.Load())
	_ = c.Close()
	return 0, io.ErrUnexpectedEOF
}

// losingService is a service over s's database and Redis, with the sender
// limit c, whose PostgreSQL connections lose the answer of the COMMIT after
// the loser is armed.
func losingService(t *testing.T, s *stack.Stack, c limits.Config) (*grab.Service, *commitLoser) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(s.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	l := &commitLoser{}
	cfg.ConnConfig.DialFunc = l.dial
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	svcCfg := s.Config
	svcCfg.PG = pgstore.New(pool)
	svcCfg.Safety.Limiter = limits.New(s.RDB, s.Redis.Keys(), c)
	return grab.New(svcCfg), l
}

// capHolds checks that alice, whose create of 600 cents (done, as what
// says) failed, may not put 500 more into envelopes today under a
// SENDER_DAILY_CENTS of 1000: the failed create's cents stayed counted.
func capHolds(t *testing.T, svc *grab.Service, what string) {
	t.Helper()
	_, err := svc.Create(t.Context(), envelope.CreateRequest{SenderID: "alice", TotalCents: 500, Count: 1})
	if !errors.Is(err, limits.ErrExceeded) {
		t.Errorf("%s + 500 of 1000 a day: %v, want limit exceeded", what, err)
	}
}

// A create whose COMMIT reached PostgreSQL but whose answer was lost wrote
// its envelope (loading, for the flusher to open): it names the envelope,
// so the client does not create it again, and keeps its cents on the
// sender's day, so SENDER_DAILY_CENTS is never passed.
func TestCreateWhoseCommitAnswerWasLostKeepsTheSendersCents(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	svc, loser := losingService(t, s, limits.Config{SenderDailyCents: 1000})
	ctx := t.Context()
	loser.armed.Store(true)
	_, err := svc.Create(ctx, envelope.CreateRequest{SenderID: "alice", TotalCents: 600, Count: 2})
	if loser.lost.Load() != 1 {
		t.Fatalf("no COMMIT answer was lost (create: %v)", err)
	}
	var notOpened *grab.NotOpenedError
	if !errors.As(err, &notOpened) || !errors.Is(err, grab.ErrUnavailable) {
		t.Fatalf("create whose commit answer was lost: %v, want it to name its envelope as written", err)
	}
	if e := s.Envelope(t, notOpened.EnvelopeID); e.SenderID != "alice" || e.TotalCents != 600 ||
		e.Status != envelope.StatusLoading {
		t.Errorf("envelope %d: %s of %d cents by %s, want alice's 600 cents loading", e.ID, e.Status,
			e.TotalCents, e.SenderID)
	}
	capHolds(t, svc, "600 written")
	if _, err := svc.Create(ctx, envelope.CreateRequest{SenderID: "alice", TotalCents: 400, Count: 1}); err != nil {
		t.Errorf("600 written + 400 of 1000 a day: %v", err)
	}
}

// When the create cannot tell whether its envelope was written (the COMMIT's
// answer was lost and PostgreSQL is then unreachable), its sender's cents
// stay counted, so that SENDER_DAILY_CENTS is never passed; the answer does
// not claim an envelope it cannot name.
func TestCreateThatMayHaveWrittenKeepsTheSendersCents(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	svc, loser := losingService(t, s, limits.Config{SenderDailyCents: 1000})
	ctx := t.Context()
	loser.downAfter.Store(true)
	loser.armed.Store(true)
	_, err := svc.Create(ctx, envelope.CreateRequest{SenderID: "alice", TotalCents: 600, Count: 2})
	var notOpened *grab.NotOpenedError
	if loser.lost.Load() != 1 || !errors.Is(err, grab.ErrUnavailable) || errors.As(err, &notOpened) {
		t.Fatalf("create whose commit answer was lost, PostgreSQL then down: %v, want unavailable naming no envelope", err)
	}
	loser.down.Store(false)
	capHolds(t, svc, "600 perhaps written")
}

// A connection cut while the COMMIT is still being made (a slow WAL flush,
// a synchronous standby): the envelope is not yet seen when the create
// looks it up, and commits after. Not seen is not proof: the sender's cents
// stay counted, so SENDER_DAILY_CENTS is never passed.
func TestCreateCutDuringASlowCommitKeepsTheSendersCents(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := t.Context()
	for _, q := range []string{ // a COMMIT that takes a second
		`CREATE FUNCTION test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$`,
		`CREATE CONSTRAINT TRIGGER test_slow_commit AFTER INSERT ON envelopes DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW EXECUTE FUNCTION test_slow_commit()`,
	} {
		if _, err := s.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	svc, loser := losingService(t, s, limits.Config{SenderDailyCents: 1000})
	loser.early.Store(true)
	loser.armed.Store(true)
	_, err := svc.Create(ctx, envelope.CreateRequest{SenderID: "alice", TotalCents: 600, Count: 2})
	if loser.lost.Load() != 1 || !errors.Is(err, grab.ErrUnavailable) {
		t.Fatalf("create cut during its commit: %v, want unavailable", err)
	}
	waitUntil(t, "the cut create's envelope committed", func(ctx context.Context) (bool, error) {
		var n int
		err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM envelopes WHERE sender_id = 'alice'`).Scan(&n)
		return n == 1, err
	})
	capHolds(t, svc, "600 written")
}

// A create refused by PostgreSQL (nothing written) gives the sender's cents
// back, as before: only a create that may have written keeps them.
func TestCreateRefusedByPostgresGivesTheSendersCentsBack(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	svc, _ := losingService(t, s, limits.Config{SenderDailyCents: 1000})
	ctx := t.Context()
	// PostgreSQL refuses the envelope's row: it answers an error and rolls
	// the transaction back.
	if _, err := s.Pool.Exec(ctx, `ALTER TABLE envelopes ADD CONSTRAINT test_refuse CHECK (total_cents <> 600)`); err != nil {
		t.Fatal(err)
	}
	_, err := svc.Create(ctx, envelope.CreateRequest{SenderID: "alice", TotalCents: 600, Count: 1})
	var notOpened *grab.NotOpenedError
	if err == nil || errors.As(err, &notOpened) {
		t.Fatalf("create refused by PostgreSQL: %v, want a failure that wrote nothing", err)
	}
	if _, err := s.Pool.Exec(ctx, `ALTER TABLE envelopes DROP CONSTRAINT test_refuse`); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Create(ctx, envelope.CreateRequest{SenderID: "alice", TotalCents: 1000, Count: 1}); err != nil {
		t.Errorf("1000 of 1000 after a refused create: %v, want the refused cents given back", err)
	}
}

// An envelope Redis took whole (grabs are granted) but that PostgreSQL
// still has loading, because marking it open failed after the load, is
// reported as grabs see it: open, with what is left, then sold out; not
// loading with nothing left while its packets are being grabbed.
func TestStatusOfAnEnvelopeLoadedInRedisButLoadingInPostgres(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := t.Context()
	e, err := s.Svc.Create(ctx, envelope.CreateRequest{SenderID: "alice", TotalCents: 300, Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	// As if PostgreSQL was lost just before the create marked it open.
	if _, err := s.Pool.Exec(ctx, `UPDATE envelopes SET status = 'loading' WHERE id = $1`, e.ID); err != nil {
		t.Fatal(err)
	}
	c, err := s.Svc.Grab(ctx, e.ID, "u1")
	if err != nil {
		t.Fatalf("grab of the envelope Redis holds: %v", err)
	}
	st, err := s.Svc.Status(ctx, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != envelope.StatusOpen || st.RemainingCount != 2 || st.GrabbedCount != 1 ||
		st.GrabbedCents != c.AmountCents {
		t.Errorf("status after 1 of 3 grabbed: %s, %d left, %d grabbed (%d cents); want open, 2 left, 1 grabbed (%d cents)",
			st.Status, st.RemainingCount, st.GrabbedCount, st.GrabbedCents, c.AmountCents)
	}
	for _, u := range []string{"u2", "u3"} {
		if _, err := s.Svc.Grab(ctx, e.ID, u); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := s.Svc.StatusByCode(ctx, e.ShareCode); err != nil || st.Status != envelope.StatusSoldOut ||
		st.RemainingCount != 0 || st.GrabbedCount != 3 {
		t.Errorf("status after all 3 grabbed: %+v, %v; want sold_out, 0 left, 3 grabbed", st, err)
	}
}
