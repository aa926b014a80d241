package flush

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"redpacket/internal/testenv"
)

// settleLeases refreshes every set of leases, round after round, until they
// partition the shards: each shard held by exactly one of them and none
// holding more than maxEach. A closed flusher's locks are released by
// PostgreSQL only once its backend has noticed the closed connection, so
// rounds that change nothing prove nothing; the partition itself is the
// condition. It gives up after 15 s and returns the last holdings, which the
// caller's wantPartition then reports.
func settleLeases(t *testing.T, shards, maxEach int, ls ...*Leases) [][]int {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var held [][]int
		for _, l := range ls {
			owned, err := l.Refresh(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, owned)
		}
		if partitioned(held, shards, maxEach) || time.Now().After(deadline) {
			return held
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// partitioned reports whether held gives every shard to exactly one holder
// and no holder more than maxEach.
func partitioned(held [][]int, shards, maxEach int) bool {
	seen := map[int]int{}
	for _, h := range held {
		if len(h) > maxEach {
			return false
		}
		for _, s := range h {
			seen[s]++
		}
	}
	for s := range shards {
		if seen[s] != 1 {
			return false
		}
	}
	return true
}

func TestLeasesShareShardsAndTakeOverFromTheDead(t *testing.T) {
	t.Parallel()
	_, url := testenv.Postgres(t)
	const shards = 16
	log := zaptest.NewLogger(t)
	a, b, c := NewLeases(url, shards, log), NewLeases(url, shards, log), NewLeases(url, shards, log)
	defer a.Close()
	defer b.Close()

	held := settleLeases(t, shards, shards, a)
	wantPartition(t, held, shards, shards)

	// Two more join: the first gives shards up until each holds its share.
	held = settleLeases(t, shards, 6, a, b, c)
	wantPartition(t, held, shards, 6)

	// One dies (its connection closes): the others hold everything again
	// within a round or two.
	start := time.Now()
	c.Close()
	held = settleLeases(t, shards, 8, a, b)
	wantPartition(t, held, shards, 8)
	t.Logf("takeover settled in %v", time.Since(start))
}

func wantPartition(t *testing.T, held [][]int, shards, maxEach int) {
	t.Helper()
	seen := map[int]int{}
	for i, h := range held {
		if len(h) > maxEach {
			t.Errorf("flusher %d holds %d shards, more than its share %d: %v", i, len(h), maxEach, h)
		}
		for _, s := range h {
			seen[s]++
		}
	}
	for s := range shards {
		if seen[s] != 1 {
			t.Errorf("shard %d is held by %d flushers, want exactly 1 (%v)", s, seen[s], held)
		}
	}
}

// The lease session asks the server to probe an idle client after 5 s: a
// flusher whose host died loses its shards in seconds, not after the
// system's two hours. A setting the URL names itself is kept.
func TestLeaseSessionKeepsItsLocksAlive(t *testing.T) {
	t.Parallel()
	_, url := testenv.Postgres(t)
	for _, tc := range []struct{ url, idle string }{
		{url, "5"},
		{withParam(url, "tcp_keepalives_idle", "7"), "7"},
		{withParam(url, "options", "-c%20tcp_keepalives_idle%3D9"), "9"},
	} {
		l := NewLeases(tc.url, 4, zaptest.NewLogger(t))
		if _, err := l.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		for setting, want := range map[string]string{"tcp_keepalives_idle": tc.idle, "tcp_keepalives_interval": "1",
			"tcp_keepalives_count": "3", "tcp_user_timeout": "8000"} {
			var got string
			if err := l.conn.QueryRow(t.Context(), "SELECT current_setting($1)", setting).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("lease session's %s = %s, want %s", setting, got, want)
			}
		}
		l.Close()
	}
}

func withParam(u, k, v string) string {
	if strings.Contains(u, "?") {
		return u + "&" + k + "=" + v
	}
	return u + "?" + k + "=" + v
}
