package testenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// keysPerMaster counts the keys matching pattern on each master.
func keysPerMaster(t *testing.T, c *redis.ClusterClient, pattern string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	out := map[string]int{}
	err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		n := 0
		iter := node.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			n++
		}
		mu.Lock()
		out[node.Options().Addr] = n
		mu.Unlock()
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The keys a test made under its prefix lie on every master; all of them are
// gone when the test ends, not only those of the node SCAN happened to reach.
func TestRedisClusterDeletesKeysOnEveryMaster(t *testing.T) {
	t.Parallel()
	var prefix string
	t.Run("write", func(t *testing.T) {
		var rdb redis.UniversalClient
		rdb, prefix = RedisCluster(t)
		ctx := context.Background()
		for i := range 64 {
			if err := rdb.Set(ctx, fmt.Sprintf("{%s:s%d}:k", prefix, i), i, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
		}
		per := keysPerMaster(t, rdb.(*redis.ClusterClient), "*"+prefix+"*")
		total := 0
		for addr, n := range per {
			if n == 0 {
				t.Errorf("master %s holds none of the 64 keys: %v", addr, per)
			}
			total += n
		}
		if len(per) < 3 || total != 64 {
			t.Fatalf("keys per master %v; want 64 keys over at least 3 masters", per)
		}
	})
	if prefix == "" {
		t.FailNow()
	}
	for addr, n := range keysPerMaster(t, NewClusterClient(t), "*"+prefix+"*") {
		if n != 0 {
			t.Errorf("master %s still holds %d keys of the finished test", addr, n)
		}
	}
}

// TestLocalClusterHelper is the process TestLocalClusterEndsWithItsProcess
// starts and kills; run directly, it does nothing.
func TestLocalClusterHelper(t *testing.T) {
	if os.Getenv("REDPACKET_LOCAL_CLUSTER_HELPER") != "1" {
		return
	}
	lc, err := startLocalCluster(context.Background())
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(strings.Join(lc.addrs, ","), lc.dir)
	// Until killed, or until the parent test process ends (its end of the
	// stdin pipe closes then).
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// A throwaway cluster goes away with the test process that started it, even
// one killed with SIGKILL: the nodes stop and their directory is removed.
func TestLocalClusterEndsWithItsProcess(t *testing.T) {
	t.Parallel()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			// Without a cluster from the environment either, this fails
			// saying how to provide one.
			RedisClusterAddrs(t)
			t.Skipf("%s is not on PATH: the throwaway cluster cannot be tested here", bin)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLocalClusterHelper$")
	cmd.Env = append(os.Environ(), "REDPACKET_LOCAL_CLUSTER_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	parentAlive, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer parentAlive.Close()
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
	var first string
	select {
	case first = <-line:
	case <-time.After(3 * time.Minute):
		t.Fatal("the helper did not start a cluster within 3 minutes")
	}
	fields := strings.Fields(first)
	if len(fields) != 2 || strings.HasPrefix(first, "error:") {
		t.Fatalf("helper said %q", first)
	}
	addrs, dir := strings.Split(fields[0], ","), fields[1]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := clusterHealthy(ctx, addrs); err != nil {
		t.Fatalf("the helper's cluster: %v", err)
	}
	if len(addrs) != clusterNodes {
		t.Fatalf("the helper's cluster has nodes %v, want %d", addrs, clusterNodes)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var alive []string
		for _, a := range addrs {
			if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
				c.Close()
				alive = append(alive, a)
			}
		}
		_, statErr := os.Stat(dir)
		if len(alive) == 0 && os.IsNotExist(statErr) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("20s after the helper was killed: nodes %v still listening, directory %s: %v", alive, dir, statErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
