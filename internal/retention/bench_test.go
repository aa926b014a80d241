package retention

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/testenv"
)

// benchEnvelopes and benchPackets are the settled envelopes each operation
// of BenchmarkRetention removes, and the packets of each.
const benchEnvelopes, benchPackets = 10, 1000

// BenchmarkRetention measures a run archiving and deleting settled
// envelopes of 1,000 packets (with an event per claim), per packet removed,
// against a reference of the same run's moments: COPY ... TO STDOUT of the
// same kind of rows of every per-envelope table into files, fsynced, and
// nothing deleted. Each operation seeds two sets of envelopes, one for
// each, and alternates which goes first.
//
//	go test -run=NONE -bench=Retention -benchtime=10x ./internal/retention
func BenchmarkRetention(b *testing.B) {
	pool, _ := testenv.Postgres(b)
	dir := b.TempDir()
	var run, ref time.Duration
	next := int64(1)
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		ids := [2][]int64{}
		for k := range ids {
			for range benchEnvelopes {
				seed(b, pool, next, benchPackets, "settled", now.Add(-48*time.Hour))
				ids[k] = append(ids[k], next)
				next++
			}
		}
		exec(b, pool, "VACUUM ANALYZE")
		b.StartTimer()
		for k := range 2 {
			if (i+k)%2 == 0 {
				run += timed(func() { benchRun(b, pool, dir) })
			} else {
				ref += timed(func() { benchCopy(b, pool, dir, ids[1]) })
			}
		}
	}
	packets := float64(b.N * benchEnvelopes * benchPackets)
	b.ReportMetric(float64(run.Nanoseconds())/packets, "ns/packet-retention")
	b.ReportMetric(float64(ref.Nanoseconds())/packets, "ns/packet-copy-reference")
	b.ReportMetric(run.Seconds()/ref.Seconds(), "ratio")
	b.ReportMetric(0, "ns/op")
}

func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

// benchRun removes the ten envelopes of lowest id (all were settled at one
// instant): the run's set, or the reference's of the operation before.
func benchRun(b *testing.B, pool *pgxpool.Pool, dir string) {
	o := Options{OlderThan: 24 * time.Hour, Dir: dir, Now: func() time.Time { return now }, Limit: benchEnvelopes}
	res, err := Run(b.Context(), pool, o)
	if err != nil || res.Removed.Packets != benchEnvelopes*benchPackets {
		b.Fatalf("run: %+v, %v", res, err)
	}
}

// benchCopy writes the rows of ids of every per-envelope table to a file
// each, with COPY TO STDOUT, and fsyncs them.
func benchCopy(b *testing.B, pool *pgxpool.Pool, dir string, ids []int64) {
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = strconv.FormatInt(id, 10)
	}
	for _, tb := range tables {
		col := "envelope_id"
		if tb.name == "envelopes" {
			col = "id"
		}
		f, err := os.Create(filepath.Join(dir, "ref-"+tb.file()))
		if err != nil {
			b.Fatal(err)
		}
		sql := fmt.Sprintf("COPY (SELECT * FROM %s WHERE %s = ANY('{%s}'::bigint[]) ORDER BY 1) TO STDOUT", tb.name, col,
			strings.Join(list, ","))
		if _, err := conn.Conn().PgConn().CopyTo(ctx, f, sql); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		_ = f.Close()
	}
}
