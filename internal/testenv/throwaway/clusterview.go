package throwaway

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, flags, masterID string
	connected                 bool
	slots                     []string // the slot ranges it serves
}

func (n clusterNode) has(flag string) bool { return slices.Contains(strings.Split(n.flags, ","), flag) }
func (n clusterNode) master() bool         { return n.has("master") }
func (n clusterNode) replica() bool        { return n.has("slave") }
func (n clusterNode) failing() bool {
	return n.has("fail") || n.has("fail?") || n.has("handshake") || n.has("noaddr")
}

// clusterState is what one node sees.
type clusterState struct {
	state   string
	slotsOK int
	nodes   map[string]clusterNode // by address
	linkUp  bool                   // a replica: master_link_status is up (INFO replication)
}

// layout is a canonical text of which master serves which slots.
func (st clusterState) layout() string {
	var parts []string
	for _, n := range st.nodes {
		if n.master() && len(n.slots) > 0 {
			parts = append(parts, n.id+":"+strings.Join(n.slots, ","))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// view reads CLUSTER INFO, INFO replication and CLUSTER NODES of the node
// at addr.
func view(ctx context.Context, addr string) (clusterState, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer func() { _ = c.Close() }()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return clusterState{}, fmt.Errorf("%s: CLUSTER INFO: %w", addr, err)
	}
	st := clusterState{nodes: map[string]clusterNode{}}
	f := infoFields(info)
	st.state = f["cluster_state"]
	st.slotsOK, _ = strconv.Atoi(f["cluster_slots_ok"])
	repl, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return clusterState{}, fmt.Errorf("%s: INFO replication: %w", addr, err)
	}
	st.linkUp = infoFields(repl)["master_link_status"] == "up"
	nodes, err := c.ClusterNodes(ctx).Result()
	if err != nil {
		return clusterState{}, fmt.Errorf("%s: CLUSTER NODES: %w", addr, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		fs := strings.Fields(line)
		if len(fs) < 8 {
			return clusterState{}, fmt.Errorf("%s: CLUSTER NODES line %q", addr, line)
		}
		a, _, _ := strings.Cut(fs[1], "@")
		st.nodes[a] = clusterNode{id: fs[0], addr: a, flags: fs[2], masterID: fs[3], connected: fs[7] == "connected", slots: fs[8:]}
	}
	return st, nil
}

// infoFields parses the "name:value" lines of an INFO-style reply.
func infoFields(info string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// Healthy checks what a whole cluster of these nodes looks like from each
// node: cluster ok with every slot served, every node known, none failing,
// every link connected, half of them masters serving slots and half
// replicas, a replica's replication link up, and the same slot layout seen
// by all.
func (c *Cluster) Healthy(ctx context.Context) error {
	var layout string
	for i, a := range c.Addrs {
		st, err := view(ctx, a)
		if err != nil {
			return err
		}
		if st.state != "ok" || st.slotsOK != 16384 || len(st.nodes) != len(c.Addrs) {
			return fmt.Errorf("%s: cluster_state %s, %d slots ok, %d nodes known", a, st.state, st.slotsOK, len(st.nodes))
		}
		masters, replicas := 0, 0
		for _, n := range st.nodes {
			if n.failing() || !n.connected {
				return fmt.Errorf("%s sees %s as %s (connected %v)", a, n.addr, n.flags, n.connected)
			}
			switch {
			case n.master() && len(n.slots) > 0:
				masters++
			case n.replica():
				replicas++
			}
		}
		if masters != len(c.Addrs)/2 || replicas != len(c.Addrs)/2 {
			return fmt.Errorf("%s sees %d masters with slots and %d replicas", a, masters, replicas)
		}
		if st.nodes[a].replica() && !st.linkUp {
			return fmt.Errorf("replica %s has not synchronized with its master yet", a)
		}
		l := st.layout()
		if i > 0 && l != layout {
			return fmt.Errorf("%s sees slots %s, %s sees %s", a, l, c.Addrs[0], layout)
		}
		layout = l
	}
	return nil
}

// WaitHealthy waits (up to d) until the cluster is Healthy.
func (c *Cluster) WaitHealthy(ctx context.Context, d time.Duration) error {
	return poll(ctx, d, func() error { return c.Healthy(ctx) }, "not healthy")
}

// ReplicaOf returns the address of the replica of the master at addr.
func (c *Cluster) ReplicaOf(ctx context.Context, master string) (string, error) {
	st, err := view(ctx, master)
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

// WaitReplicaOf waits (up to d) until the node at addr is a replica of the
// master at master with its replication link up.
func (c *Cluster) WaitReplicaOf(ctx context.Context, addr, master string, d time.Duration) error {
	return poll(ctx, d, func() error {
		st, err := view(ctx, addr)
		if err != nil {
			return err
		}
		n, m := st.nodes[addr], st.nodes[master]
		if n.replica() && n.masterID == m.id && st.linkUp {
			return nil
		}
		return fmt.Errorf("%s is %s of %s, link up %v", addr, n.flags, n.masterID, st.linkUp)
	}, "not a replica of "+master)
}

// WaitPromoted waits (up to d) until every node but dead sees replica as a
// master serving slots, dead as failed, and the cluster ok.
func (c *Cluster) WaitPromoted(ctx context.Context, dead, replica string, d time.Duration) error {
	return poll(ctx, d, func() error {
		for _, a := range c.Addrs {
			if a == dead {
				continue
			}
			st, err := view(ctx, a)
			if err != nil {
				return err
			}
			r, m := st.nodes[replica], st.nodes[dead]
			if st.state != "ok" || st.slotsOK != 16384 || !r.master() || len(r.slots) == 0 || !strings.Contains(m.flags, "fail") {
				return fmt.Errorf("%s: cluster_state %s, %d slots ok; sees %s as %s, %s as %s",
					a, st.state, st.slotsOK, replica, r.flags, dead, m.flags)
			}
		}
		return nil
	}, "no failover")
}

// poll calls check every 50 ms until it returns nil or d passes.
func poll(ctx context.Context, d time.Duration, check func() error, what string) error {
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s after %s: %w", what, d, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
