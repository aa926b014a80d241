package testenv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterNodes is the size of a throwaway cluster: 3 masters, 3 replicas.
const clusterNodes = 6

// supervisor runs the nodes of a throwaway cluster and removes them when the
// test process that started it ends. Its standard input is a pipe whose only
// write end the test process holds (Go opens files close-on-exec, so no other
// child inherits it): the kernel closes that end when the process exits,
// however it exits (returns, panics, is killed by a timeout or SIGKILL), cat
// sees end of file, and the nodes are stopped and their directory removed.
// It runs in a process group of its own, so a Ctrl-C meant for `go test`
// does not kill it before it has cleaned up.
//
// $1 is the directory, the rest are the ports.
const supervisor = `dir=$1; shift
pids=
for port in "$@"; do
  mkdir -p "$dir/$port" || exit 1
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --cluster-enabled yes --cluster-config-file "$dir/$port/nodes.conf" \
    --dir "$dir/$port" --logfile "$dir/$port/redis.log" \
    --shutdown-on-sigterm 'nosave now' </dev/null &
  pids="$pids $!"
done
cat >/dev/null
kill $pids 2>/dev/null
(sleep 5; kill -9 $pids 2>/dev/null) &
killer=$!
wait $pids
kill $killer 2>/dev/null
rm -rf "$dir"
`

// localCluster is a Redis Cluster a test process started for itself.
type localCluster struct {
	addrs []string
	dir   string
	sup   *exec.Cmd
	lease *os.File // write end of the supervisor's stdin: the cluster lives while it is open
}

// localClusters keeps every started cluster reachable for the life of the
// process: were a lease collected, its finalizer would close it and stop the
// cluster under the tests.
var localClusters struct {
	sync.Mutex
	all []*localCluster
}

// startLocalCluster starts a cluster of 3 masters and 3 replicas on free
// loopback ports with redis-server and redis-cli from PATH. It lives until
// the test process ends (see supervisor). Ports are picked free but may be
// taken by someone else before a node binds them; a failed attempt is
// cleaned up and retried on other ports.
func startLocalCluster(ctx context.Context) (*localCluster, error) {
	for _, bin := range []string{"redis-server", "redis-cli", "sh"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("no cluster in the environment, and cannot start one: %s is not on PATH", bin)
		}
	}
	var errs []error
	for attempt := 0; attempt < 3 && ctx.Err() == nil; attempt++ {
		lc, err := tryLocalCluster(ctx)
		if err == nil {
			localClusters.Lock()
			localClusters.all = append(localClusters.all, lc)
			localClusters.Unlock()
			return lc, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("start a throwaway Redis Cluster: %w", errors.Join(errs...))
}

func tryLocalCluster(ctx context.Context) (*localCluster, error) {
	ports, err := FreeClusterPorts(clusterNodes)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redpacket-cluster-")
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	args := []string{"-c", supervisor, "redpacket-cluster", dir}
	lc := &localCluster{dir: dir, lease: w}
	for _, p := range ports {
		args = append(args, strconv.Itoa(p))
		lc.addrs = append(lc.addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	lc.sup = exec.Command("sh", args...)
	lc.sup.Stdin = r
	lc.sup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = lc.sup.Start()
	_ = r.Close()
	if err != nil {
		_ = w.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start the cluster supervisor: %w", err)
	}
	if err := lc.form(ctx); err != nil {
		err = fmt.Errorf("cluster on %s: %w%s", strings.Join(lc.addrs, ","), err, lc.logTails())
		lc.stop()
		return nil, err
	}
	return lc, nil
}

// form waits for the nodes, joins them into a cluster and waits until it is
// healthy.
func (lc *localCluster) form(ctx context.Context) error {
	for _, a := range lc.addrs {
		if err := lc.waitNode(ctx, a); err != nil {
			return err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	args := append([]string{"--cluster", "create"}, lc.addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(cctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := clusterHealthy(ctx, lc.addrs)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not healthy after a minute: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitNode waits (up to 15 s) until the node at addr answers and is the one
// this cluster started, not another process's server that took the port.
func (lc *localCluster) waitNode(ctx context.Context, addr string) error {
	_, port, _ := net.SplitHostPort(addr)
	want := filepath.Join(lc.dir, port, "nodes.conf")
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got, err := c.ConfigGet(ctx, "cluster-config-file").Result()
		if err == nil && got["cluster-config-file"] == want {
			return nil
		}
		if err == nil {
			return fmt.Errorf("%s is served by another Redis (cluster-config-file %q)", addr, got["cluster-config-file"])
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("node %s does not answer: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop closes the lease and waits (up to 15 s) for the supervisor to have
// stopped the nodes and removed their directory. Tests of the supervisor
// call it; the clusters tests use end with the process instead.
func (lc *localCluster) stop() error {
	_ = lc.lease.Close()
	done := make(chan error, 1)
	go func() { done <- lc.sup.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(15 * time.Second):
		return errors.New("cluster supervisor still running 15s after its lease was closed")
	}
}

// logTails returns the end of each node's log, for an error message.
func (lc *localCluster) logTails() string {
	var b strings.Builder
	for _, a := range lc.addrs {
		_, port, _ := net.SplitHostPort(a)
		data, err := os.ReadFile(filepath.Join(lc.dir, port, "redis.log"))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		fmt.Fprintf(&b, "\n--- %s log (end) ---\n%s", a, strings.Join(lines[max(0, len(lines)-8):], "\n"))
	}
	return b.String()
}

// FreeClusterPorts picks n loopback ports whose cluster bus ports (port +
// 10000) are free too, for a test that runs a Redis Cluster of its own. Ports come from 10000-21999 so the bus ports, 20000-31999, stay
// below Linux's ephemeral range and outgoing connections do not take them.
func FreeClusterPorts(n int) ([]int, error) {
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, errors.New("found no free loopback ports for a cluster")
		}
		p := 10000 + rand.IntN(12000)
		if slices.Contains(ports, p) || !portFree(p) || !portFree(p+10000) {
			continue
		}
		ports = append(ports, p)
	}
	return ports, nil
}

func portFree(p int) bool {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}

// clusterHealthy checks what a complete cluster of these nodes looks like:
// every node knows all of them, sees the cluster ok with every slot served
// and agrees with the others on which master serves which slots; half the
// nodes are masters holding slots, the other half their replicas, and every
// link is up.
func clusterHealthy(ctx context.Context, addrs []string) error {
	var layout string
	for i, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		err := func() error {
			defer c.Close()
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			f := infoFields(info)
			if f["cluster_state"] != "ok" || f["cluster_slots_ok"] != "16384" ||
				f["cluster_known_nodes"] != strconv.Itoa(len(addrs)) {
				return fmt.Errorf("cluster_state %s, %s slots ok, %s nodes known",
					f["cluster_state"], f["cluster_slots_ok"], f["cluster_known_nodes"])
			}
			nodes, err := c.ClusterNodes(ctx).Result()
			if err != nil {
				return err
			}
			if err := checkRoles(nodes, len(addrs)/2); err != nil {
				return err
			}
			slots, err := c.ClusterSlots(ctx).Result()
			if err != nil {
				return err
			}
			l := slotLayout(slots)
			if i > 0 && l != layout {
				return fmt.Errorf("sees slots %s, %s sees %s", l, addrs[0], layout)
			}
			layout = l
			return nil
		}()
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
	}
	return nil
}

// checkRoles reads CLUSTER NODES: want masters serving slots, as many
// replicas, no node failing or still joining, every link connected.
func checkRoles(nodes string, want int) error {
	masters, replicas := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return fmt.Errorf("CLUSTER NODES line %q", line)
		}
		flags := f[2]
		if strings.Contains(flags, "fail") || strings.Contains(flags, "handshake") ||
			strings.Contains(flags, "noaddr") || f[7] != "connected" {
			return fmt.Errorf("node %s: %s, %s", f[1], flags, f[7])
		}
		switch {
		case strings.Contains(flags, "master") && len(f) > 8:
			masters++
		case strings.Contains(flags, "slave"):
			replicas++
		}
	}
	if masters != want || replicas != want {
		return fmt.Errorf("%d masters with slots and %d replicas, want %d of each", masters, replicas, want)
	}
	return nil
}

// slotLayout is a canonical text of CLUSTER SLOTS: ranges and their master.
func slotLayout(slots []redis.ClusterSlot) string {
	parts := make([]string, 0, len(slots))
	for _, s := range slots {
		master := ""
		if len(s.Nodes) > 0 {
			master = s.Nodes[0].ID
		}
		parts = append(parts, fmt.Sprintf("%05d-%05d:%s", s.Start, s.End, master))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
