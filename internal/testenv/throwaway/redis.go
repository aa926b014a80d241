package throwaway

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartRedis runs redis-server from PATH on a free loopback port, in a new
// temporary directory, without persistence. Its URL names db 0.
func StartRedis(ctx context.Context) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not on PATH (install Redis 7, e.g. apt-get install redis-server)")
	}
	return attempts(ctx, "Redis", func() (*Server, error) { return tryRedis(ctx, bin) })
}

func tryRedis(ctx context.Context, bin string) (*Server, error) {
	ports, err := FreePorts(1, false)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redpacket-redis-")
	if err != nil {
		return nil, err
	}
	const name = "redis"
	if err := writeRun(dir, name, nil, redisArgs(bin, dir, name, ports[0])...); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	sup, err := startSupervisor(dir, "TERM", nil, name)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Dir: dir, name: name, sup: sup, URL: "redis://" + addr(ports[0]) + "/0"}
	want := filepath.Join(dir, name)
	if real, err := filepath.EvalSymlinks(want); err == nil {
		want = real // Redis reports its working directory resolved
	}
	if err := waitRedis(ctx, sup, name, addr(ports[0]), 0, "dir", want); err != nil {
		_ = sup.stop(15 * time.Second)
		return nil, err
	}
	return s, nil
}

// redisArgs is the command line of a Redis server named name of dir: on
// loopback, no persistence, its files and working directory in dir/name,
// its log on standard output (dir/name/out.log).
func redisArgs(bin, dir, name string, port int, extra ...string) []string {
	args := []string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", filepath.Join(dir, name), "--logfile", ""}
	return append(args, extra...)
}

// waitRedis waits (up to 15 s) until the server name logs, past byte from
// of its output (a restarted server appends to it), that it is ready; then
// checks that the server answering at addr is that one: its setting key
// (dir, or cluster-config-file) reads want.
func waitRedis(ctx context.Context, sup *supervisor, name, addr string, from int64, key, want string) error {
	logPath := filepath.Join(sup.dir, name, "out.log")
	err := waitUp(ctx, sup, name, 15*time.Second, func() (bool, error) {
		b, _ := os.ReadFile(logPath)
		return int64(len(b)) > from && strings.Contains(string(b[from:]), "Ready to accept connections"), nil
	})
	if err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer func() { _ = c.Close() }()
	got, err := c.ConfigGet(ctx, key).Result()
	if err != nil {
		return fmt.Errorf("%s at %s: CONFIG GET %s: %w", name, addr, key, err)
	}
	if got[key] != want {
		return fmt.Errorf("%s is served by another Redis (%s %q, want %q): %w", addr, key, got[key], want, errPortTaken)
	}
	return nil
}
