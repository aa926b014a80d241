package pgstore_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/pgstore"
	"redpacket/internal/testenv"
)

// dbaIndexes are the indexes only the DBA queries of docs/dba.md read.
// Claims write claims_claimed_at_idx (BRIN since migration 000016);
// envelopes_settled_at_idx is partial on settled_at, which claims never set.
var dbaIndexes = []string{"claims_claimed_at_idx", "envelopes_settled_at_idx"}

// BenchmarkApplyClaimsDBAIndexes measures what the indexes for DBAs cost the
// flusher's claim writes. Each operation applies two batches of 2,000 new
// claims with the shipped ApplyClaims, one on a database with the indexes
// and one on a database without them, alternately and in alternating order,
// so that both figures come from the same moments of a shared machine.
// Besides wall-clock time it reports the CPU time of each database's
// backend during its ApplyClaims calls (from /proc, when PostgreSQL runs on
// this machine), which the load of other work moves much less.
func BenchmarkApplyClaimsDBAIndexes(b *testing.B) {
	ctx := b.Context()
	with := newBenchBackend(b, false)
	without := newBenchBackend(b, true)
	for i := 0; b.Loop(); i++ {
		// Which goes first alternates, so neither always follows the other.
		if i%2 == 0 {
			with.apply(ctx)
			without.apply(ctx)
		} else {
			without.apply(ctx)
			with.apply(ctx)
		}
	}
	claims := float64(b.N * claimBatch)
	b.ReportMetric(float64(with.wall.Nanoseconds())/claims, "ns/claim-with-dba-indexes")
	b.ReportMetric(float64(without.wall.Nanoseconds())/claims, "ns/claim-without")
	b.ReportMetric(with.wall.Seconds()/without.wall.Seconds(), "ratio")
	if with.cpu >= 0 && without.cpu > 0 {
		b.ReportMetric(float64(with.cpu.Nanoseconds())/claims, "cpu-ns/claim-with")
		b.ReportMetric(float64(without.cpu.Nanoseconds())/claims, "cpu-ns/claim-without")
		b.ReportMetric(with.cpu.Seconds()/without.cpu.Seconds(), "cpu-ratio")
	}
	b.ReportMetric(0, "ns/op")
}

// benchBackend is a store on a database of its own, over one connection so
// that its backend's CPU time can be read.
type benchBackend struct {
	b       *testing.B
	s       *pgstore.Store
	batches *batches
	stat    string        // /proc/<backend pid>/stat; "" when not readable
	wall    time.Duration // in ApplyClaims
	cpu     time.Duration // of the backend in ApplyClaims; -1 when not readable
}

func newBenchBackend(b *testing.B, dropDBAIndexes bool) *benchBackend {
	ctx := b.Context()
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns, cfg.MinConns = 1, 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if dropDBAIndexes {
		for _, idx := range dbaIndexes {
			if _, err := pool.Exec(ctx, "DROP INDEX "+idx); err != nil {
				b.Fatal(err)
			}
		}
	}
	var pid int
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		b.Fatal(err)
	}
	s := pgstore.New(pool)
	bb := &benchBackend{b: b, s: s, batches: newBatches(b, s), stat: "/proc/" + strconv.Itoa(pid) + "/stat"}
	if bb.ticks() < 0 {
		bb.stat, bb.cpu = "", -1
	}
	return bb
}

func (bb *benchBackend) apply(ctx context.Context) {
	batch := bb.batches.next(ctx)
	t0, start := bb.ticks(), time.Now()
	res, err := bb.s.ApplyClaims(ctx, batch)
	bb.wall += time.Since(start)
	if err != nil || res.Applied != claimBatch {
		bb.b.Fatalf("ApplyClaims = %+v, %v", res, err)
	}
	if bb.cpu >= 0 {
		// Clock ticks are 10 ms (USER_HZ 100); summed over many batches the
		// rounding evens out.
		bb.cpu += time.Duration(bb.ticks()-t0) * 10 * time.Millisecond
	}
}

// ticks reads the backend's user + system CPU time in clock ticks, or -1.
func (bb *benchBackend) ticks() int64 {
	if bb.stat == "" {
		return -1
	}
	b, err := os.ReadFile(bb.stat)
	if err != nil {
		return -1
	}
	s := string(b)
	// Fields after the command name, which is in parentheses: state is the
	// first, utime the 12th, stime the 13th.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return -1
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return u + st
}
