package e2e_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/testenv"
)

type grabbed struct {
	PacketID    int64 `json:"packet_id"`
	AmountCents int64 `json:"amount_cents"`
	Repeat      bool  `json:"repeat"`
}

// A new deployment: migrate, start both daemons, create an envelope and grab
// over HTTP, and find the grabs in PostgreSQL; then both stop cleanly.
func TestDeployCreateGrabFlush(t *testing.T) {
	t.Parallel()
	dbURL := testenv.EmptyPostgresURL(t)
	_, prefix := testenv.Redis(t)
	grabberAddr, flusherAddr := freeAddr(t), freeAddr(t)
	const token = "s3cret"
	env := []string{
		"DATABASE_URL=" + dbURL, "REDIS_URL=" + testenv.RedisURL(t), "REDIS_KEY_PREFIX=" + prefix,
		"GRABBER_ADDR=" + grabberAddr, "FLUSHER_ADDR=" + flusherAddr, "GRABBER_API_TOKEN=" + token,
		"LOG_LEVEL=debug",
	}

	// The grabber refuses a database that has not been migrated.
	code, out := run(t, "grabber", env)
	if code == 0 || !strings.Contains(out, "schema") {
		t.Fatalf("grabber on an empty database: exit %d, %s", code, out)
	}
	for range 2 { // migrate is idempotent
		if code, out := run(t, "flusher", env, "migrate"); code != 0 {
			t.Fatalf("flusher migrate: exit %d: %s", code, out)
		}
	}

	flusher := start(t, "flusher", env)
	grabber := start(t, "grabber", env)
	base := "http://" + grabberAddr
	waitReady(t, base+"/readyz")
	waitReady(t, "http://"+flusherAddr+"/readyz")

	var created struct {
		EnvelopeID int64  `json:"envelope_id"`
		Status     string `json:"status"`
	}
	if code := call(t, "POST", base+"/v1/envelopes", "",
		`{"sender_id":"alice","total_cents":1000,"count":10}`, nil); code != 401 {
		t.Fatalf("create without token: %d, want 401", code)
	}
	if code := call(t, "POST", base+"/v1/envelopes", token,
		`{"sender_id":"alice","total_cents":1000,"count":10}`, &created); code != 201 || created.Status != "open" {
		t.Fatalf("create: %d %+v", code, created)
	}
	answers := grabFourThenRepeat(t, fmt.Sprintf("%s/v1/envelopes/%d/grab", base, created.EnvelopeID), token)

	waitFlushed(t, dbURL, created.EnvelopeID, answers)
	requireMetrics(t, "http://"+flusherAddr+"/metrics", "redpacket_flush_batch_size_count",
		`redpacket_pending_claims{shard="0"}`, "redpacket_flush_lag_seconds_bucket")
	requireMetrics(t, base+"/metrics", `redpacket_grabs_total{result="granted"} 4`,
		`redpacket_grabs_total{result="repeat"} 1`, `redpacket_sequence_fetches_total{key="envelope"}`)
	grabber.stop(t)
	flusher.stop(t)
}

// grabFourThenRepeat has bob-0 .. bob-3 grab at grabURL, each granted a first
// time, then bob-0 again, answered his packet as a repeat. It returns the
// first answers by user.
func grabFourThenRepeat(t *testing.T, grabURL, token string) map[string]grabbed {
	t.Helper()
	answers := map[string]grabbed{}
	for i := range 4 {
		user := fmt.Sprintf("bob-%d", i)
		var g grabbed
		if code := call(t, "POST", grabURL, token, `{"user_id":"`+user+`"}`, &g); code != 200 || g.Repeat {
			t.Fatalf("grab for %s: %d %+v", user, code, g)
		}
		answers[user] = g
	}
	var again grabbed
	if call(t, "POST", grabURL, token, `{"user_id":"bob-0"}`, &again); again != (grabbed{answers["bob-0"].PacketID, answers["bob-0"].AmountCents, true}) {
		t.Fatalf("repeat grab answered %+v, first answer %+v", again, answers["bob-0"])
	}
	return answers
}

// waitFlushed waits (up to 5 s) until PostgreSQL holds exactly the answers.
func waitFlushed(t *testing.T, dbURL string, envelopeID int64, answers map[string]grabbed) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := map[string]grabbed{}
		rows, _ := conn.Query(ctx, `SELECT user_id, packet_id, amount_cents FROM user_grabs WHERE envelope_id = $1`, envelopeID)
		var g grabbed
		var user string
		if _, err := pgx.ForEachRow(rows, []any{&user, &g.PacketID, &g.AmountCents}, func() error {
			got[user] = g
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if maps.Equal(got, answers) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5s postgres holds %+v; answers were %+v", got, answers)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// requireMetrics waits (up to 5 s: the flusher publishes some once a second)
// until url serves every one of the wanted lines or fragments.
func requireMetrics(t *testing.T, url string, want ...string) {
	t.Helper()
	var missing []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		missing = missing[:0]
		for _, w := range want {
			if !strings.Contains(string(body), w) {
				missing = append(missing, w)
			}
		}
		if resp.StatusCode == http.StatusOK && len(missing) == 0 {
			return
		}
	}
	t.Fatalf("%s lacks %q", url, missing)
}
