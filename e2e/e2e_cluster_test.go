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

	const envelopes, users = 4, 3
	var es []sharedEnvelope
	for range envelopes {
		var c sharedEnvelope
		if code := call(t, "POST", base+"/v1/envelopes", token,
			`{"sender_id":"alice","total_cents":500,"count":5}`, &c); code != 201 || c.Status != "open" {
			t.Fatalf("create: %d %+v", code, c)
		}
		es = append(es, c)
	}
	answers := grabInTurns(t, base, token, es, users)
	for i, e := range es {
		assertRepeatAndStatusByCode(t, base, token, e, answers[i]["bob-0"], users)
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
	masters := clusterMastersOf(t, rdb, prefix, es)
	t.Logf("%d envelopes on %d masters", envelopes, masters)
	grabber.stop(t)
	flusher.stop(t)
}

// sharedEnvelope is a created envelope and the code it is shared by.
type sharedEnvelope struct {
	EnvelopeID int64  `json:"envelope_id"`
	ShareCode  string `json:"share_code"`
	Status     string `json:"status"`
}

// grabInTurns has users bob-0 .. bob-(users-1) grab each envelope of es,
// taking turns so that grabs of all shards interleave; each must be granted a
// first time. It returns the answers of each envelope by user.
func grabInTurns(t *testing.T, base, token string, es []sharedEnvelope, users int) []map[string]grabbed {
	t.Helper()
	answers := make([]map[string]grabbed, len(es))
	for u := range users {
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
	return answers
}

// assertRepeatAndStatusByCode fails the test unless bob-0's second grab of e
// answers his first packet as a repeat, and e's status by share code counts
// users grabs of its 5 packets.
func assertRepeatAndStatusByCode(t *testing.T, base, token string, e sharedEnvelope, first grabbed, users int64) {
	t.Helper()
	var again grabbed
	grabURL := fmt.Sprintf("%s/v1/envelopes/%d/grab", base, e.EnvelopeID)
	want := first
	want.Repeat = true
	if call(t, "POST", grabURL, token, `{"user_id":"bob-0"}`, &again); again != want {
		t.Fatalf("envelope %d: repeat grab answered %+v, first answer %+v", e.EnvelopeID, again, first)
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

// clusterMastersOf fails the test unless each envelope's meta is on the
// cluster, and returns over how many masters they are spread.
func clusterMastersOf(t *testing.T, rdb redis.UniversalClient, prefix string, es []sharedEnvelope) int {
	t.Helper()
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
	return len(masters)
}
