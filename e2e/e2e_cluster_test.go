package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// TestDeployCreateGrabFlush on a Redis Cluster: both daemons get
// REDIS_CLUSTER_ADDRS and a key prefix (and a REDIS_URL nothing answers on,
// so only the cluster can serve them); envelopes on several shards are
// created and grabbed over HTTP, looked up by share code, a short id is
// handed out, and PostgreSQL ends up with exactly the grabs answered.
func TestClusterDeployCreateGrabFlush(t *testing.T) {
	t.Parallel()
	dbURL := testenv.EmptyPostgresURL(t)
	rdb, prefix := testenv.RedisCluster(t)
	grabberAddr, flusherAddr := freeAddr(t), freeAddr(t)
	const token = "s3cret"
	env := []string{
		"DATABASE_URL=" + dbURL, "REDIS_URL=redis://127.0.0.1:1/0",
		"REDIS_CLUSTER_ADDRS=" + strings.Join(testenv.RedisClusterAddrs(t), ","), "REDIS_KEY_PREFIX=" + prefix,
		"GRABBER_ADDR=" + grabberAddr, "FLUSHER_ADDR=" + flusherAddr, "GRABBER_API_TOKEN=" + token,
		"LOG_LEVEL=debug",
	}
	if code, out := run(t, "flusher", env, "migrate"); code != 0 {
		t.Fatalf("flusher migrate: exit %d: %s", code, out)
	}
	flusher := start(t, "flusher", env)
	grabber := start(t, "grabber", env)
	base := "http://" + grabberAddr
	waitReady(t, base+"/readyz")
	waitReady(t, "http://"+flusherAddr+"/readyz")

	type created struct {
		EnvelopeID int64  `json:"envelope_id"`
		ShareCode  string `json:"share_code"`
		Status     string `json:"status"`
	}
	const envelopes, users = 4, 3
	var es []created
	for range envelopes {
		var c created
		if code := call(t, "POST", base+"/v1/envelopes", token,
			`{"sender_id":"alice","total_cents":500,"count":5}`, &c); code != 201 || c.Status != "open" {
			t.Fatalf("create: %d %+v", code, c)
		}
		es = append(es, c)
	}

	answers := make([]map[string]grabbed, envelopes)
	for u := range users { // users take turns, so grabs of all shards interleave
		user := fmt.Sprintf("bob-%d", u)
		for i, e := range es {
			if answers[i] == nil {
				answers[i] = map[string]grabbed{}
			}
			var g grabbed
			grabURL := fmt.Sprintf("%s/v1/envelopes/%d/grab", base, e.EnvelopeID)
			if code := call(t, "POST", grabURL, token, `{"user_id":"`+user+`"}`, &g); code != 200 || g.Repeat {
				t.Fatalf("grab %d for %s: %d %+v", e.EnvelopeID, user, code, g)
			}
			answers[i][user] = g
		}
	}
	for i, e := range es {
		var again grabbed
		grabURL := fmt.Sprintf("%s/v1/envelopes/%d/grab", base, e.EnvelopeID)
		want := answers[i]["bob-0"]
		want.Repeat = true
		if call(t, "POST", grabURL, token, `{"user_id":"bob-0"}`, &again); again != want {
			t.Fatalf("envelope %d: repeat grab answered %+v, first answer %+v", e.EnvelopeID, again, answers[i]["bob-0"])
		}
		var status struct {
			EnvelopeID     int64 `json:"envelope_id"`
			GrabbedCount   int64 `json:"grabbed_count"`
			RemainingCount int64 `json:"remaining_count"`
		}
		if code := call(t, "GET", base+"/v1/envelopes/by-code/"+e.ShareCode, token, "", &status); code != 200 ||
			status.EnvelopeID != e.EnvelopeID || status.GrabbedCount != users || status.RemainingCount != 5-users {
			t.Fatalf("status by share code %s: %d %+v", e.ShareCode, code, status)
		}
	}
	var short1, short2 struct {
		ShortID int64 `json:"short_id"`
	}
	if code := call(t, "POST", base+"/v1/users/bob-0/short-id", token, "", &short1); code != 200 || short1.ShortID == 0 {
		t.Fatalf("short id: %d %+v", code, short1)
	}
	if call(t, "POST", base+"/v1/users/bob-0/short-id", token, "", &short2); short2 != short1 {
		t.Fatalf("short id again: %+v, first %+v", short2, short1)
	}

	for i, e := range es {
		waitFlushed(t, dbURL, e.EnvelopeID, answers[i])
	}

	// The daemons' keys are on the cluster, spread over its masters.
	keys := redisstore.NewKeys(prefix, 16)
	ctx := context.Background()
	masters := map[string]bool{}
	for _, e := range es {
		if n, err := rdb.Exists(ctx, keys.Meta(e.EnvelopeID)).Result(); err != nil || n != 1 {
			t.Fatalf("envelope %d's meta is not on the cluster: %d, %v", e.EnvelopeID, n, err)
		}
		node, err := rdb.(*redis.ClusterClient).MasterForKey(ctx, keys.Meta(e.EnvelopeID))
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	t.Logf("%d envelopes on %d masters", envelopes, len(masters))
	grabber.stop(t)
	flusher.stop(t)
}
