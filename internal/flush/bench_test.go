package flush

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"redpacket/internal/envelope"
	"redpacket/internal/telemetry"
	"redpacket/internal/testenv/stack"
)

// BenchmarkDrain measures how fast the flusher makes queued claims durable:
// 100,000 claims of one hot envelope (so one shard, as in a real red-packet
// rush) are queued first, then drained with a batch size.
func BenchmarkDrain(b *testing.B) {
	for _, size := range []int{1000, 2000, 5000} {
		b.Run("batch="+strconv.Itoa(size), func(b *testing.B) {
			s := stack.New(b)
			defer s.Redis.Coalesce(4, 64)()
			f := New(s.Redis, s.PG, Config{BatchSize: size}, zap.NewNop())
			ctx := context.Background()
			var claims int
			var took time.Duration
			for range b.N {
				claims += queueClaims(b, s, 100_000)
				start := time.Now()
				if err := f.Drain(ctx); err != nil {
					b.Fatal(err)
				}
				took += time.Since(start)
			}
			b.ReportMetric(float64(claims)/took.Seconds(), "claims/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkDrainVsCopy measures the flusher against its reference: each
// operation drains 100,000 queued claims of one hot envelope (events
// included) and, right after on the same database, COPYs 100,000
// claim-shaped rows (packet id primary key, unique (envelope_id, user_id),
// unique order number) into a table of their own. It reports both rates and
// their ratio, from the same moments of the machine, and the share of the
// drain's time each phase of a batch took (redpacket_flush_phase_duration_seconds);
// with one transaction a batch (pipeline=1), and with four or eight (the
// default), written by two (the default) or three connections at once
// (writers).
func BenchmarkDrainVsCopy(b *testing.B) {
	for _, c := range []struct{ pipeline, writers int }{{1, 1}, {4, 2}, {8, 2}, {8, 3}} {
		name := "pipeline=" + strconv.Itoa(c.pipeline) + ",writers=" + strconv.Itoa(c.writers)
		b.Run(name, func(b *testing.B) { drainVsCopy(b, c.pipeline, c.writers) })
	}
}

func drainVsCopy(b *testing.B, pipeline, writers int) {
	const n = 100_000
	s := stack.New(b)
	defer s.Redis.Coalesce(4, 64)()
	f := New(s.Redis, s.PG, Config{BatchSize: 2000, Pipeline: pipeline, Writers: writers}, zap.NewNop())
	ctx := context.Background()
	if _, err := s.Pool.Exec(ctx, `CREATE TABLE copy_reference (packet_id bigint PRIMARY KEY, envelope_id bigint NOT NULL,
		user_id text NOT NULL, claimed_at timestamptz NOT NULL, order_no text UNIQUE, UNIQUE (envelope_id, user_id))`); err != nil {
		b.Fatal(err)
	}
	var drained, copied time.Duration
	phasesBefore := readPhases(b)
	for i := range b.N {
		queueClaims(b, s, n)
		start := time.Now()
		if err := f.Drain(ctx); err != nil {
			b.Fatal(err)
		}
		drained += time.Since(start)
		rows := make([][]any, n)
		at := time.Now()
		for j := range rows {
			id := int64(i*n + j)
			rows[j] = []any{id, int64(i), "u" + strconv.FormatInt(id, 10), at, "2030051700" + strconv.FormatInt(100_000_000+id, 10)}
		}
		start = time.Now()
		if _, err := s.Pool.CopyFrom(ctx, pgx.Identifier{"copy_reference"},
			[]string{"packet_id", "envelope_id", "user_id", "claimed_at", "order_no"}, pgx.CopyFromRows(rows)); err != nil {
			b.Fatal(err)
		}
		copied += time.Since(start)
	}
	claims := float64(b.N * n)
	b.ReportMetric(claims/drained.Seconds(), "claims/s")
	b.ReportMetric(claims/copied.Seconds(), "copy-rows/s")
	b.ReportMetric(copied.Seconds()/drained.Seconds(), "ratio")
	phasesAfter := readPhases(b)
	for _, p := range telemetry.FlushPhases {
		b.ReportMetric(100*(phasesAfter[p].sum-phasesBefore[p].sum)/drained.Seconds(), p+"-%")
	}
	b.ReportMetric(0, "ns/op")
}

// queueClaims creates an envelope of n packets and grabs all of them.
func queueClaims(b *testing.B, s *stack.Stack, n int) int {
	ctx := context.Background()
	e, err := s.Svc.Create(ctx, envelope.CreateRequest{SenderID: "bench", TotalCents: int64(n) * 10, Count: int64(n)})
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if _, err := s.Svc.Grab(ctx, e.ID, "u"+strconv.FormatInt(i, 10)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return n
}

// BenchmarkSettle measures settlement: 400 envelopes of 10 packets, 5 of
// them grabbed and drained, all past expiry, settled by upkeep rounds back
// to back (as Run goes on when a round was full), in envelopes/s.
func BenchmarkSettle(b *testing.B) {
	s := stack.New(b)
	f := New(s.Redis, s.PG, Config{KeyTTL: time.Hour}, zap.NewNop())
	f.now = s.Clock.Now
	ctx := context.Background()
	const perOp = 400
	var settled int
	var took time.Duration
	for range b.N {
		secs := int64(60)
		for range perOp {
			e, err := s.Svc.Create(ctx, envelope.CreateRequest{SenderID: "s", TotalCents: 1000, Count: 10, ExpiresInSeconds: &secs})
			if err != nil {
				b.Fatal(err)
			}
			for u := range 5 {
				if _, err := s.Svc.Grab(ctx, e.ID, "u"+strconv.Itoa(u)); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := f.Drain(ctx); err != nil {
			b.Fatal(err)
		}
		s.Clock.Advance(61 * time.Second)
		start := time.Now()
		for more := true; more; more = f.settleMore {
			if err := f.Upkeep(ctx, false); err != nil {
				b.Fatal(err)
			}
		}
		took += time.Since(start)
		settled += perOp
	}
	b.ReportMetric(float64(settled)/took.Seconds(), "envelopes/s")
	b.ReportMetric(0, "ns/op")
}
