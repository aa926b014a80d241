package daemon

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/testenv"
	"redpacket/internal/testenv/throwaway"
)

// A cluster node answers PING while its cluster is down and refuses every
// grab: readiness and the dependency metric must say Redis is down as soon
// as one master reports cluster_state other than ok, and up when every
// master reports ok. A master whose ACL denies CLUSTER INFO has answered,
// which is all that can be told of it.
func TestRedisCheckSeesAClusterDown(t *testing.T) {
	t.Parallel()
	okInfo := "$" + "cluster_state:ok\r\ncluster_slots_assigned:16384\r\n"
	failInfo := "$" + "cluster_state:fail\r\ncluster_slots_assigned:16384\r\n"
	for _, tc := range []struct {
		name   string
		second string // the second master's reply to CLUSTER INFO
		ready  bool
	}{
		{"every master ok", okInfo, true},
		{"one master sees the cluster failed", failInfo, false},
		{"CLUSTER INFO denied", "-NOPERM User app has no permissions to run the 'cluster|info' command", true},
	} {
		first, second := fakeClusterNode(t, okInfo), fakeClusterNode(t, tc.second)
		c := fakeCluster(first, second)
		t.Cleanup(func() { _ = c.Close() })
		_, port, _ := net.SplitHostPort(second) // go-redis drops a loopback host of a slot map
		check := (&Clients{Redis: c}).Checks()["redis"]
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		err := check(ctx)
		cancel()
		switch {
		case tc.ready && err != nil:
			t.Errorf("%s: redis check = %v, want ready", tc.name, err)
		case !tc.ready && (err == nil || !strings.Contains(err.Error(), ":"+port) || !strings.Contains(err.Error(), "fail")):
			t.Errorf("%s: redis check = %v, want not ready, naming %s and its cluster_state fail", tc.name, err, second)
		}
	}
}

// A single Redis is ready when it answers PING.
func TestRedisCheckSingleServer(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: fakeClusterNode(t, "-ERR This instance has cluster support disabled"),
		Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	if err := (&Clients{Redis: c}).Checks()["redis"](t.Context()); err != nil {
		t.Fatalf("redis check = %v, want ready", err)
	}
}

// A Redis that takes a connection and never answers is not up, and the
// check says so by its deadline, not the client's own read timeout.
func TestRedisCheckAnswersByItsDeadline(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	t.Cleanup(func() {
		_ = l.Close()
		for len(accepted) > 0 {
			_ = (<-accepted).Close()
		}
	})
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			select {
			case accepted <- conn: // held open, never answered
			default:
				_ = conn.Close()
			}
		}
	}()
	c := redis.NewClient(&redis.Options{Addr: l.Addr().String(), Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = (&Clients{Redis: c}).Checks()["redis"](ctx)
	if took := time.Since(start); err == nil || took > 2*time.Second {
		t.Fatalf("redis check of a silent server = %v after %v; want an error by its 300 ms deadline", err, took)
	}
}

// The clusters of the real thing: the shared healthy cluster is ready; a
// private cluster that lost a master and its replica (cluster_state:fail
// on the others, which still answer PING) is not.
func TestReadyOnClusters(t *testing.T) {
	t.Parallel()
	pg, _ := testenv.Postgres(t)
	shared := &Clients{PG: pg, Redis: testenv.NewClusterClient(t)}
	if err := shared.Ready(t.Context()); err != nil {
		t.Fatalf("the shared healthy cluster: Ready = %v, want ready", err)
	}

	cl := testenv.PrivateCluster(t, throwaway.ClusterOptions{NodeTimeout: time.Second})
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs})
	t.Cleanup(func() { _ = c.Close() })
	private := &Clients{PG: pg, Redis: c}
	if err := private.Ready(t.Context()); err != nil {
		t.Fatalf("a healthy private cluster: Ready = %v, want ready", err)
	}
	m, err := c.MasterForKey(t.Context(), "any") // one master
	if err != nil {
		t.Fatal(err)
	}
	master := m.Options().Addr
	replica, err := cl.ReplicaOf(t.Context(), master)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{replica, master} {
		if err := cl.Kill(a); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second) // as /readyz
		err := private.Ready(ctx)
		cancel()
		if err != nil && survivorsSeeFail(t, cl, master, replica) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after a master and its replica were killed: Ready = %v, want not ready", err)
		}
	}
}

// survivorsSeeFail says whether a node still up (the first one) reports cluster_state:fail,
// the state in which a PING alone would still have said ready.
func survivorsSeeFail(t *testing.T, cl *throwaway.Cluster, master, replica string) bool {
	for _, a := range cl.Addrs {
		if a == master || a == replica {
			continue
		}
		n := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		info, err := n.ClusterInfo(t.Context()).Result()
		pong := n.Ping(t.Context()).Err()
		_ = n.Close()
		return err == nil && pong == nil && clusterState(info) == "fail"
	}
	return false
}

func TestClusterState(t *testing.T) {
	for info, want := range map[string]string{
		"cluster_state:ok\r\ncluster_slots_assigned:16384\r\n":  "ok",
		"cluster_enabled:1\r\ncluster_state:fail\r\n":           "fail",
		"cluster_slots_assigned:16384\r\ncluster_known_nodes:6": "",
	} {
		if got := clusterState(info); got != want {
			t.Errorf("clusterState(%q) = %q, want %q", info, got, want)
		}
	}
}

// fakeCluster is a cluster client whose masters are the fake nodes at
// addrs, each serving a share of the slots.
func fakeCluster(addrs ...string) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			var slots []redis.ClusterSlot
			per := 16384 / len(addrs)
			for i, a := range addrs {
				end := (i+1)*per - 1
				if i == len(addrs)-1 {
					end = 16383
				}
				slots = append(slots, redis.ClusterSlot{Start: i * per, End: end, Nodes: []redis.ClusterNode{{Addr: a}}})
			}
			return slots, nil
		},
		Protocol: 2, DisableIdentity: true, MaxRetries: -1,
	})
}

// fakeClusterNode is a server that answers PING with PONG, CLUSTER INFO
// with info (a RESP reply, "$" and the text for a bulk string, "-" and the
// message for an error) and anything else with OK.
func fakeClusterNode(t *testing.T, info string) string {
	if text, bulk := strings.CutPrefix(info, "$"); bulk {
		info = "$" + strconv.Itoa(len(text)) + "\r\n" + text
	}
	return testenv.FakeRedis(t, func(args []string) string {
		switch strings.ToUpper(strings.Join(args, " ")) {
		case "PING":
			return "+PONG\r\n"
		case "CLUSTER INFO":
			return info + "\r\n"
		}
		return "+OK\r\n"
	})
}
