package e2e_test

// A Redis Cluster of the test's own (3 masters, 3 replicas) whose nodes the
// test can stop, kill and watch fail over; the failover tests use it, never
// the shared test cluster.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/testenv"
)

// privateClusterSupervisor runs the nodes and removes them when the test
// process ends, however it ends: its standard input is a pipe whose write end
// only the test process holds, so the read loop ends when the test closes it
// (cleanup) or dies. The nodes are its children. The test may ask it, one
// line at a time, to "reap <port>" (wait for a node the test killed, so its
// pid is never signalled again) or "start <port>" (start that node again,
// with the cluster config it had). The nodes keep no data on disk: a killed
// node comes back empty and learns its role from the cluster.
//
// $1 directory, $2 cluster-node-timeout (ms), then the ports.
const privateClusterSupervisor = `dir=$1; timeout=$2; shift 2
run() {
  redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly no \
    --cluster-enabled yes --cluster-config-file "$dir/$1/nodes.conf" \
    --cluster-node-timeout "$timeout" --repl-diskless-sync-delay 0 \
    --dir "$dir/$1" --logfile "$dir/$1/redis.log" </dev/null >>"$dir/$1/stdout.log" 2>&1 &
  eval "pid_$1=$!"
}
for port in "$@"; do
  mkdir -p "$dir/$port" || exit 1
  run "$port"
done
while read -r cmd port; do
  case $cmd in
  reap) eval "p=\$pid_$port"; [ -n "$p" ] && wait "$p"; eval "pid_$port="; echo "reaped $port" ;;
  start) run "$port"; echo "started $port" ;;
  esac
done
pids=
for port in "$@"; do eval "pids=\"\$pids \$pid_$port\""; done
kill -9 $pids 2>/dev/null
wait
rm -rf "$dir"
`

// privateCluster is a running cluster of the test's own.
type privateCluster struct {
	addrs   []string
	pids    map[string]int // by address
	dir     string
	sup     *exec.Cmd
	lease   *os.File      // the supervisor's standard input
	replies *bufio.Reader // its standard output
}

// startPrivateCluster starts 3 masters with one replica each on free
// loopback ports (from 10000-21999, never the shared test cluster's or
// Redis's), with nodeTimeout as cluster-node-timeout so that a dead master's
// replica takes over within a few seconds. The nodes are killed and their
// directory removed when the test ends. A failed start (a port taken in the
// meantime) is retried on other ports.
func startPrivateCluster(t *testing.T, nodeTimeout time.Duration) *privateCluster {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli", "sh"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is not on the PATH: the failover tests start a Redis Cluster of their own with redis-server and redis-cli (Redis 7)", bin)
		}
	}
	var errs []error
	for range 3 {
		pc, err := tryPrivateCluster(t, nodeTimeout)
		if err == nil {
			return pc
		}
		errs = append(errs, err)
	}
	t.Fatalf("start a private Redis Cluster: %v", errors.Join(errs...))
	return nil
}

func tryPrivateCluster(t *testing.T, nodeTimeout time.Duration) (*privateCluster, error) {
	ports, err := testenv.FreeClusterPorts(6)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redpacket-failover-")
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	pc := &privateCluster{dir: dir, lease: w}
	args := []string{"-c", privateClusterSupervisor, "redpacket-failover", dir, strconv.FormatInt(nodeTimeout.Milliseconds(), 10)}
	for _, p := range ports {
		args = append(args, strconv.Itoa(p))
		pc.addrs = append(pc.addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	pc.sup = exec.Command("sh", args...)
	pc.sup.Stdin = r
	pc.sup.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := pc.sup.StdoutPipe()
	if err == nil {
		pc.replies = bufio.NewReader(out)
		err = pc.sup.Start()
	}
	_ = r.Close()
	if err != nil {
		_ = w.Close()
		_ = os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pc.form(ctx); err != nil {
		err = fmt.Errorf("cluster on %s: %w%s", strings.Join(pc.addrs, ","), err, pc.logTails(8))
		pc.stop(t)
		return nil, err
	}
	pc.pids = map[string]int{}
	for _, a := range pc.addrs {
		pid, err := nodePID(ctx, a)
		if err != nil {
			pc.stop(t)
			return nil, err
		}
		pc.pids[a] = pid
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("private cluster logs:%s", pc.logTails(30))
		}
		pc.stop(t)
	})
	return pc, nil
}

// stop closes the lease and waits (up to 15 s) for the supervisor to have
// killed the nodes, reaped them and removed their directory.
func (pc *privateCluster) stop(t *testing.T) {
	_ = pc.lease.Close()
	done := make(chan error, 1)
	go func() { done <- pc.sup.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Errorf("private cluster supervisor (pid %d) still running 15s after its lease was closed", pc.sup.Process.Pid)
	}
}

// form waits for the nodes, creates the cluster and waits until every node
// sees it whole: every slot served, 3 masters and 3 replicas, links up.
func (pc *privateCluster) form(ctx context.Context) error {
	for _, a := range pc.addrs {
		if err := pc.waitNode(ctx, a); err != nil {
			return err
		}
	}
	args := append([]string{"--cluster", "create"}, pc.addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for {
		err := pc.whole(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not whole: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitNode waits until the node at addr answers and is ours (its cluster
// config file is in our directory), not a server of someone else.
func (pc *privateCluster) waitNode(ctx context.Context, addr string) error {
	_, port, _ := net.SplitHostPort(addr)
	want := filepath.Join(pc.dir, port, "nodes.conf")
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

// whole checks every node: cluster ok, all slots served, 6 nodes known, 3
// masters and 3 replicas, none failing, every link connected.
func (pc *privateCluster) whole(ctx context.Context) error {
	for _, a := range pc.addrs {
		st, err := clusterView(ctx, a)
		if err != nil {
			return err
		}
		if st.state != "ok" || st.slotsOK != 16384 || len(st.nodes) != len(pc.addrs) {
			return fmt.Errorf("%s: cluster_state %s, %d slots ok, %d nodes known", a, st.state, st.slotsOK, len(st.nodes))
		}
		masters, replicas := 0, 0
		for _, n := range st.nodes {
			if n.failing() || !n.connected {
				return fmt.Errorf("%s sees %s as %s (connected %v)", a, n.addr, n.flags, n.connected)
			}
			switch {
			case n.master() && n.slots:
				masters++
			case n.replica():
				replicas++
			}
		}
		if masters != len(pc.addrs)/2 || replicas != len(pc.addrs)/2 {
			return fmt.Errorf("%s sees %d masters with slots and %d replicas", a, masters, replicas)
		}
		if n := st.nodes[a]; n.replica() && !st.linkUp {
			return fmt.Errorf("replica %s has not synchronized with its master yet", a)
		}
	}
	return nil
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, flags, masterID string
	connected, slots          bool
}

func (n clusterNode) master() bool  { return slices.Contains(strings.Split(n.flags, ","), "master") }
func (n clusterNode) replica() bool { return slices.Contains(strings.Split(n.flags, ","), "slave") }
func (n clusterNode) failing() bool {
	for _, f := range strings.Split(n.flags, ",") {
		if f == "fail" || f == "fail?" || f == "handshake" || f == "noaddr" {
			return true
		}
	}
	return false
}

// clusterState is what one node sees.
type clusterState struct {
	state   string
	slotsOK int
	nodes   map[string]clusterNode // by address
	linkUp  bool                   // a replica: master_link_status is up (INFO replication)
}

// clusterView reads CLUSTER INFO and CLUSTER NODES of the node at addr.
func clusterView(ctx context.Context, addr string) (clusterState, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return clusterState{}, fmt.Errorf("%s: CLUSTER INFO: %w", addr, err)
	}
	st := clusterState{nodes: map[string]clusterNode{}}
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "cluster_state":
			st.state = v
		case "cluster_slots_ok":
			st.slotsOK, _ = strconv.Atoi(v)
		}
	}
	repl, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return clusterState{}, fmt.Errorf("%s: INFO replication: %w", addr, err)
	}
	st.linkUp = strings.Contains(repl, "master_link_status:up")
	nodes, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return clusterState{}, fmt.Errorf("%s: CLUSTER NODES: %w", addr, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return clusterState{}, fmt.Errorf("%s: CLUSTER NODES line %q", addr, line)
		}
		a, _, _ := strings.Cut(f[1], "@")
		st.nodes[a] = clusterNode{id: f[0], addr: a, flags: f[2], masterID: f[3], connected: f[7] == "connected", slots: len(f) > 8}
	}
	return st, nil
}

// replicaOf returns the address of the replica of the master at addr.
func (pc *privateCluster) replicaOf(ctx context.Context, master string) (string, error) {
	st, err := clusterView(ctx, master)
	if err != nil {
		return "", err
	}
	m, ok := st.nodes[master]
	if !ok {
		return "", fmt.Errorf("%s does not know itself", master)
	}
	for _, n := range st.nodes {
		if n.replica() && n.masterID == m.id {
			return n.addr, nil
		}
	}
	return "", fmt.Errorf("master %s has no replica", master)
}

// nodePID returns the process id of the node at addr (INFO server).
func nodePID(ctx context.Context, addr string) (int, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("%s: no process_id in INFO server", addr)
}

// signal sends sig to the node at addr. A node the test killed is a zombie
// of the supervisor until the cluster stops, so its pid is not reused.
func (pc *privateCluster) signal(t *testing.T, addr string, sig syscall.Signal) {
	t.Helper()
	pid := pc.pids[addr]
	if pid == 0 {
		t.Fatalf("no node %s", addr)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("signal %v to node %s (pid %d): %v", sig, addr, pid, err)
	}
}

// tell sends one command to the supervisor and waits (up to 10 s) for its
// answer.
func (pc *privateCluster) tell(t *testing.T, cmd, port string) {
	t.Helper()
	if _, err := fmt.Fprintf(pc.lease, "%s %s\n", cmd, port); err != nil {
		t.Fatalf("cluster supervisor: %s %s: %v", cmd, port, err)
	}
	got := make(chan string, 1)
	go func() {
		line, _ := pc.replies.ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case line := <-got:
		if !strings.HasPrefix(line, cmd) {
			t.Fatalf("cluster supervisor: %s %s: answered %q", cmd, port, line)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("cluster supervisor: %s %s: no answer after 10s", cmd, port)
	}
}

// kill SIGKILLs the node at addr and has the supervisor reap it.
func (pc *privateCluster) kill(t *testing.T, addr string) {
	t.Helper()
	pc.signal(t, addr, syscall.SIGKILL)
	_, port, _ := net.SplitHostPort(addr)
	pc.tell(t, "reap", port)
	delete(pc.pids, addr)
}

// restart starts the node at addr again (after kill) and waits until it
// answers.
func (pc *privateCluster) restart(t *testing.T, addr string) {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	pc.tell(t, "start", port)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := pc.waitNode(ctx, addr); err != nil {
		t.Fatal(err)
	}
	pid, err := nodePID(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	pc.pids[addr] = pid
}

// waitReplicaOf waits (up to d) until the node at addr is a replica of the
// master at master with its link up.
func (pc *privateCluster) waitReplicaOf(ctx context.Context, addr, master string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		st, err := clusterView(ctx, addr)
		if err == nil {
			n, m := st.nodes[addr], st.nodes[master]
			if n.replica() && n.masterID == m.id && st.linkUp {
				return nil
			}
			err = fmt.Errorf("%s is %s of %s, link up %v", addr, n.flags, n.masterID, st.linkUp)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not a replica of %s after %s: %w", master, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitPromoted waits (up to d) until every surviving node sees replica as a
// master serving slots, the dead master as failed, and the cluster ok.
func (pc *privateCluster) waitPromoted(ctx context.Context, dead, replica string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := func() error {
			for _, a := range pc.addrs {
				if a == dead {
					continue
				}
				st, err := clusterView(ctx, a)
				if err != nil {
					return err
				}
				r, m := st.nodes[replica], st.nodes[dead]
				if st.state != "ok" || st.slotsOK != 16384 || !r.master() || !r.slots || !strings.Contains(m.flags, "fail") {
					return fmt.Errorf("%s: cluster_state %s, %d slots ok; sees %s as %s, %s as %s",
						a, st.state, st.slotsOK, replica, r.flags, dead, m.flags)
				}
			}
			return nil
		}()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no failover after %s: %w", d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logTails returns the last n lines of each node's log.
func (pc *privateCluster) logTails(n int) string {
	var b strings.Builder
	for _, a := range pc.addrs {
		_, port, _ := net.SplitHostPort(a)
		data, err := os.ReadFile(filepath.Join(pc.dir, port, "redis.log"))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		fmt.Fprintf(&b, "\n--- %s log (end) ---\n%s", a, strings.Join(lines[max(0, len(lines)-n):], "\n"))
	}
	return b.String()
}
