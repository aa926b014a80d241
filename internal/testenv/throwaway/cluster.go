package throwaway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterOptions shape a throwaway Redis Cluster.
type ClusterOptions struct {
	// NodeTimeout is cluster-node-timeout: how long a master may be
	// unreachable before its replica takes over. 0 keeps Redis's, 15 s.
	NodeTimeout time.Duration
}

// Cluster is a throwaway Redis Cluster of 3 masters with one replica each.
// Its nodes keep no data on disk: a killed node restarts empty and learns
// its role from the others (the cluster config it had is kept).
type Cluster struct {
	Addrs []string // every node, masters and replicas
	Dir   string   // removed when the cluster stops
	sup   *supervisor
}

// clusterNodes is the size of a throwaway cluster: 3 masters, 3 replicas.
const clusterNodes = 6

// StartCluster starts the nodes with redis-server and redis-cli from PATH,
// joins them into a cluster and waits until it is healthy. A failed start
// (a port taken in the meantime) is cleaned up and retried on other ports.
func StartCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s is not on PATH (install Redis 7, e.g. apt-get install redis-server)", bin)
		}
	}
	var errs []error
	for attempt := 0; attempt < 3 && ctx.Err() == nil; attempt++ {
		c, err := tryCluster(ctx, opts)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("start a throwaway Redis Cluster: %w", errors.Join(errs...))
}

func tryCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	ports, err := FreePorts(clusterNodes, true)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redpacket-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir}
	var names []string
	for _, p := range ports {
		c.Addrs = append(c.Addrs, addr(p))
		names = append(names, nodeName(addr(p)))
		if err := writeRun(dir, nodeName(addr(p)), nil, c.nodeArgs(p, opts)...); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	if c.sup, err = startSupervisor(dir, "TERM", nil, names...); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := c.form(ctx); err != nil {
		err = fmt.Errorf("cluster on %s: %w%s", strings.Join(c.Addrs, ","), err, c.Logs(8))
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

func nodeName(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return "n" + port
}

func (c *Cluster) nodeArgs(port int, opts ClusterOptions) []string {
	name := nodeName(addr(port))
	extra := []string{"--cluster-enabled", "yes", "--cluster-config-file", c.configFile(addr(port)),
		"--repl-diskless-sync-delay", "0"}
	if opts.NodeTimeout > 0 {
		extra = append(extra, "--cluster-node-timeout", strconv.FormatInt(opts.NodeTimeout.Milliseconds(), 10))
	}
	return redisArgs("redis-server", c.Dir, name, port, extra...)
}

func (c *Cluster) configFile(addr string) string {
	return filepath.Join(c.Dir, nodeName(addr), "nodes.conf")
}

// form waits for the nodes, joins them and waits (up to a minute) until
// the cluster is healthy.
func (c *Cluster) form(ctx context.Context) error {
	for _, a := range c.Addrs {
		if err := waitRedis(ctx, c.sup, nodeName(a), a, 0, "cluster-config-file", c.configFile(a)); err != nil {
			return err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(cctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	return c.WaitHealthy(cctx, time.Minute)
}

// Stop stops every node and removes the directory (SIGKILL for a node not
// stopped within 10 s); it waits up to 15 s. Not calling it is fine: the
// cluster stops when this process ends.
func (c *Cluster) Stop() error { return c.sup.stop(15 * time.Second) }

// Kill SIGKILLs the node at addr and waits until it is gone.
func (c *Cluster) Kill(addr string) error { return c.sup.kill(nodeName(addr)) }

// Pause stops the node at addr (SIGSTOP): it holds its connections but
// answers nothing, as a node stuck or cut off would.
func (c *Cluster) Pause(addr string) error { return c.sup.signal(nodeName(addr), syscall.SIGSTOP) }

// Resume continues a paused node (SIGCONT); harmless on a running one.
func (c *Cluster) Resume(addr string) error { return c.sup.signal(nodeName(addr), syscall.SIGCONT) }

// Restart starts the node at addr again after Kill, with the cluster
// config it had and no data, and waits (up to 15 s) until it answers.
func (c *Cluster) Restart(ctx context.Context, addr string) error {
	name := nodeName(addr)
	var from int64
	if st, err := os.Stat(filepath.Join(c.Dir, name, "out.log")); err == nil {
		from = st.Size()
	}
	if _, err := c.sup.start(name); err != nil {
		return err
	}
	return waitRedis(ctx, c.sup, name, addr, from, "cluster-config-file", c.configFile(addr))
}

// CutReplicaLinks has the master at addr drop the connections of its
// replicas (CLIENT KILL TYPE replica); they reconnect unless paused.
func (c *Cluster) CutReplicaLinks(ctx context.Context, master string) error {
	rc := redis.NewClient(&redis.Options{Addr: master, MaxRetries: -1})
	defer func() { _ = rc.Close() }()
	if err := rc.ClientKillByFilter(ctx, "TYPE", "replica").Err(); err != nil {
		return fmt.Errorf("cut the replication links of %s: %w", master, err)
	}
	return nil
}

// Logs returns the last n lines of each node's log.
func (c *Cluster) Logs(n int) string {
	var b strings.Builder
	for _, a := range c.Addrs {
		if tail := logTail(filepath.Join(c.Dir, nodeName(a), "out.log"), n); tail != "" {
			fmt.Fprintf(&b, "\n--- %s log (end) ---\n%s", a, tail)
		}
	}
	return b.String()
}
