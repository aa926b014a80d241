package throwaway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// started is what the helper process reports of the servers it started.
type started struct {
	Postgres, Redis, PostgresDir, RedisDir, ClusterDir string
	Cluster                                            []string
}

// TestServersHelper is the process TestServersEndWithTheirProcess starts
// and kills; run directly, it does nothing.
func TestServersHelper(t *testing.T) {
	if os.Getenv("REDPACKET_THROWAWAY_HELPER") != "1" {
		return
	}
	ctx := context.Background()
	pg, err := StartPostgres(ctx)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	rs, err := StartRedis(ctx)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	c, err := StartCluster(ctx, ClusterOptions{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	b, _ := json.Marshal(started{Postgres: pg.URL, PostgresDir: pg.Dir, Redis: rs.URL, RedisDir: rs.Dir, Cluster: c.Addrs, ClusterDir: c.Dir})
	fmt.Println(string(b))
	// Until killed, or until the parent test process ends.
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// Servers go away with the process that started them, even one killed with
// SIGKILL: they stop listening and their directories are removed.
func TestServersEndWithTheirProcess(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServersHelper$")
	cmd.Env = append(os.Environ(), "REDPACKET_THROWAWAY_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	parentAlive, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = parentAlive.Close() }()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	var s started
	select {
	case l := <-line:
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("helper said %q", l)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the helper did not start its servers within 3 minutes")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	checkPostgres(ctx, t, s.Postgres)
	checkRedis(ctx, t, s.Redis)
	if err := (&Cluster{Addrs: s.Cluster}).Healthy(ctx); err != nil {
		t.Fatalf("the helper's cluster: %v", err)
	}
	if len(s.Cluster) != clusterNodes {
		t.Fatalf("the helper's cluster has nodes %v, want %d", s.Cluster, clusterNodes)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	addrs := append([]string{hostPort(t, s.Postgres), hostPort(t, s.Redis)}, s.Cluster...)
	waitGone(t, 20*time.Second, addrs, s.PostgresDir, s.RedisDir, s.ClusterDir)
}

// Stop stops a server and removes its directory at once.
func TestStopRemovesTheServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, start := range []func(context.Context) (*Server, error){StartPostgres, StartRedis} {
		s, err := start(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(s.URL, "postgres:") {
			checkPostgres(ctx, t, s.URL)
		} else {
			checkRedis(ctx, t, s.URL)
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		waitGone(t, 0, []string{hostPort(t, s.URL)}, s.Dir)
	}
}

// A killed master's replica takes over; the master restarted comes back as
// its replica; a paused node answers nothing until resumed.
func TestClusterKillRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, err := StartCluster(ctx, ClusterOptions{NodeTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Log(c.Logs(20))
		}
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		waitGone(t, 0, c.Addrs, c.Dir)
	}()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	defer func() { _ = rdb.Close() }()
	m, err := rdb.MasterForKey(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	master := m.Options().Addr
	replica, err := c.ReplicaOf(ctx, master)
	if err != nil {
		t.Fatal(err)
	}

	if err := c.Pause(replica); err != nil {
		t.Fatal(err)
	}
	probe := redis.NewClient(&redis.Options{Addr: replica, MaxRetries: -1, ReadTimeout: 300 * time.Millisecond})
	defer func() { _ = probe.Close() }()
	if err := probe.Ping(ctx).Err(); err == nil {
		t.Errorf("paused replica %s answered PING", replica)
	}
	if err := c.Resume(replica); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicaOf(ctx, replica, master, 20*time.Second); err != nil {
		t.Fatal(err)
	}

	if err := c.Kill(master); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitPromoted(ctx, master, replica, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, master); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReplicaOf(ctx, master, replica, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
}

func checkPostgres(ctx context.Context, t *testing.T, u string) {
	t.Helper()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(ctx) }()
	var n int
	if _, err := c.Exec(ctx, "CREATE TABLE t (n int)"); err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO t VALUES (7)"); err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	if err := c.QueryRow(ctx, "SELECT n FROM t").Scan(&n); err != nil || n != 7 {
		t.Fatalf("%s: read %d, %v; want 7", u, n, err)
	}
}

func checkRedis(ctx context.Context, t *testing.T, u string) {
	t.Helper()
	opts, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer func() { _ = c.Close() }()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("%s: read %q, %v", u, got, err)
	}
}

func hostPort(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Host
}

// waitGone waits (up to d; at once when 0) until nothing listens at addrs
// and the directories are gone.
func waitGone(t *testing.T, d time.Duration, addrs []string, dirs ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var left []string
		for _, a := range addrs {
			if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
				_ = c.Close()
				left = append(left, a+" listening")
			}
		}
		for _, dir := range dirs {
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				left = append(left, dir+" still there")
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the end: %s", d, strings.Join(left, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
