package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"redpacket/internal/testenv"
)

var keyLine = regexp.MustCompile(`^rpk_[A-Za-z0-9_-]{48}\n$`)

// apikeyCreate runs `flusher apikey create` and returns the key, which must
// be the only line of standard output and appear nowhere else.
func apikeyCreate(t *testing.T, env []string, name, scopes string, more ...string) string {
	t.Helper()
	code, stdout, stderr := runOut(t, "flusher", env, append([]string{"apikey", "create", "-name", name, "-scopes", scopes}, more...)...)
	if code != 0 || !keyLine.MatchString(stdout) {
		t.Fatalf("apikey create -name %s: exit %d, stdout %q, stderr %s; want 0 and the key alone", name, code, stdout, stderr)
	}
	key := strings.TrimSpace(stdout)
	if strings.Contains(stderr, key[4:]) {
		t.Errorf("apikey create repeats the key on standard error: %s", stderr)
	}
	return key
}

// get sends a GET with a bearer key and returns the status and the
// WWW-Authenticate challenge.
func get(t *testing.T, url, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// The operator commands and two grabbers in GRABBER_AUTH=keys on one
// database: keys made, listed (never their material) and revoked with the
// real binary; a client rotating (two keys at once); the revoked key refused
// by both grabbers within 5 s, with no restart; scopes; unknown keys 401
// with the challenge; the access log names the client; last use recorded.
func TestAPIKeys(t *testing.T) {
	t.Parallel()
	dbURL := testenv.PostgresURL(t)
	_, prefix := testenv.Redis(t)
	env := append(faultEnv(dbURL, testenv.RedisURL(t), prefix, freeAddr(t), freeAddr(t)), "GRABBER_AUTH=keys", "ACCESS_LOG=on")

	shop1 := apikeyCreate(t, env, "shop-1", "create,grab,read")
	reader := apikeyCreate(t, env, "reader", "read")
	apikeyCreate(t, env, "unused", "events")
	assertApikeyMisuseRefused(t, env)
	code, stdout, _ := runOut(t, "flusher", env, "apikey", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^shop-1\s+shop-1\s+create,grab,read\s+\d{4}-\d\d-\d\dT\S+Z\s+-$`).MatchString(stdout) ||
		!strings.Contains(stdout, "reader") || strings.Contains(stdout, "rpk_") {
		t.Errorf("apikey list: exit %d:\n%s", code, stdout)
	}

	s := startStackWith(t, dbURL, testenv.RedisURL(t), prefix, "GRABBER_AUTH=keys", "ACCESS_LOG=on")
	secondAddr := freeAddr(t)
	second := start(t, "grabber", append(s.env, "GRABBER_ADDR="+secondAddr))
	secondBase := "http://" + secondAddr
	waitReady(t, secondBase+"/readyz")
	bases := []string{s.base, secondBase}

	assertUnknownKeysChallenged(t, bases, shop1[:len(shop1)-8]+"AAAAAAAA")
	envelopeID := createAndGrabWithKeys(t, s.base, secondBase, shop1, reader)
	statusURL := fmt.Sprintf("/v1/envelopes/%d", envelopeID)

	// Rotation: a second key of the same client, then the first revoked.
	shop2 := apikeyCreate(t, env, "shop-2", "create,grab,read", "-client", "shop-1")
	waitStatus(t, bases, statusURL, shop2, http.StatusOK, 5*time.Second, "the new key is taken")
	waitStatus(t, bases, statusURL, shop1, http.StatusOK, 0, "the old key still passes while both are active")
	if code, out, errOut := runOut(t, "flusher", env, "apikey", "revoke", "-name", "shop-1"); code != 0 {
		t.Fatalf("apikey revoke: exit %d: %s%s", code, out, errOut)
	}
	took := waitStatus(t, bases, statusURL, shop1, http.StatusUnauthorized, 5*time.Second, "the revoked key is refused")
	t.Logf("both grabbers refuse the revoked key %s after the revoke command ended", took.Round(time.Millisecond))
	waitStatus(t, bases, statusURL, shop2, http.StatusOK, 0, "the new key passes after the old one's revocation")

	// Last use is written at the latest when a grabber stops.
	second.stop(t)
	s.stop(t)
	assertKeysUsedAndRevoked(t, env)
	// The access log names the client and the request's id.
	if !regexp.MustCompile(`"msg":"request".*"route":"POST /v1/envelopes/\{id\}/grab","status":200,.*"client":"shop-1","request_id":"[0-9a-f]{32}"`).
		MatchString(second.out.String()) {
		t.Errorf("no access log line of the grab in the second grabber's output:\n%s", second.out)
	}
}

// assertApikeyMisuseRefused fails the test unless `flusher apikey` refuses a
// taken name, unknown scopes, a bad or missing name, extra arguments, an
// unknown key and unknown verbs, each with its exit code and nothing on
// standard output.
func assertApikeyMisuseRefused(t *testing.T, env []string) {
	t.Helper()
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"apikey", "create", "-name", "shop-1", "-scopes", "grab"}, 1}, // the name is taken
		{[]string{"apikey", "create", "-name", "x", "-scopes", "grab,delete"}, 2},
		{[]string{"apikey", "create", "-name", "two words", "-scopes", "grab"}, 2},
		{[]string{"apikey", "create", "-name", "x", "-client", "two words", "-scopes", "grab"}, 2},
		{[]string{"apikey", "create", "-scopes", "grab"}, 2},
		{[]string{"apikey", "create", "-name", "x", "-scopes", "grab", "now"}, 2},
		{[]string{"apikey", "revoke", "-name", "nobody"}, 1},
		{[]string{"apikey"}, 2},
		{[]string{"apikey", "delete", "-name", "shop-1"}, 2},
	} {
		if code, stdout, stderr := runOut(t, "flusher", env, c.args...); code != c.code || stdout != "" {
			t.Errorf("flusher %q: exit %d, stdout %q (stderr %s); want %d and nothing on stdout", c.args, code, stdout, stderr, c.code)
		}
	}
}

// assertUnknownKeysChallenged fails the test unless each grabber of bases
// answers no key, the unknown key and a malformed one 401 with the Bearer
// challenge.
func assertUnknownKeysChallenged(t *testing.T, bases []string, unknown string) {
	t.Helper()
	for _, base := range bases {
		for _, key := range []string{"", unknown, "not-a-key"} {
			code, challenge := get(t, base+"/v1/envelopes/1", key)
			if code != http.StatusUnauthorized || !strings.HasPrefix(challenge, `Bearer realm="redpacket"`) {
				t.Errorf("%s with key %q: %d %q, want 401 and the Bearer challenge", base, key, code, challenge)
			}
		}
	}
}

// createAndGrabWithKeys creates an envelope on the first grabber with the
// shop's key and grabs it on the second; a read key's grab is refused 403
// insufficient_scope. It returns the envelope's id.
func createAndGrabWithKeys(t *testing.T, base, secondBase, shop, reader string) int64 {
	t.Helper()
	var env1 createdEnvelope
	if code := call(t, "POST", base+"/v1/envelopes", shop, `{"sender_id":"alice","total_cents":300,"count":3}`, &env1); code != 201 {
		t.Fatalf("create with shop-1's key: %d", code)
	}
	grabURL := fmt.Sprintf("%s/v1/envelopes/%d/grab", secondBase, env1.EnvelopeID)
	if code := call(t, "POST", grabURL, shop, `{"user_id":"bob"}`, nil); code != 200 {
		t.Errorf("grab on the second grabber with shop-1's key: %d", code)
	}
	var refused struct {
		Error struct{ Code string } `json:"error"`
	}
	if code := call(t, "POST", grabURL, reader, `{"user_id":"carol"}`, &refused); code != 403 || refused.Error.Code != "insufficient_scope" {
		t.Errorf("grab with a read key: %d %+v, want 403 insufficient_scope", code, refused)
	}
	return env1.EnvelopeID
}

// assertKeysUsedAndRevoked fails the test unless `flusher apikey list -all
// -json` shows which keys were used and which revoked, and no key itself.
func assertKeysUsedAndRevoked(t *testing.T, env []string) {
	t.Helper()
	code, stdout, _ := runOut(t, "flusher", env, "apikey", "list", "-all", "-json")
	var listed struct {
		Keys []struct {
			Name       string     `json:"name"`
			Client     string     `json:"client"`
			Scopes     []string   `json:"scopes"`
			LastUsedAt *time.Time `json:"last_used_at"`
			RevokedAt  *time.Time `json:"revoked_at"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(stdout), &listed); code != 0 || err != nil {
		t.Fatalf("apikey list -all -json: exit %d, %v:\n%s", code, err, stdout)
	}
	got := map[string]string{}
	for _, k := range listed.Keys {
		got[k.Name] = fmt.Sprintf("%s used %v revoked %v", k.Client, k.LastUsedAt != nil, k.RevokedAt != nil)
	}
	want := map[string]string{"shop-1": "shop-1 used true revoked true", "shop-2": "shop-1 used true revoked false",
		"reader": "reader used true revoked false", "unused": "unused used false revoked false"}
	if fmt.Sprint(got) != fmt.Sprint(want) || strings.Contains(stdout, "rpk_") {
		t.Errorf("apikey list -all -json: %v, want %v\n%s", got, want, stdout)
	}
}

// waitStatus polls GET path with key on every base until each answers
// want, failing after within (0: asks once); it returns how long it took.
func waitStatus(t *testing.T, bases []string, path, key string, want int, within time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	for _, base := range bases {
		for {
			code, _ := get(t, base+path, key)
			if code == want {
				break
			}
			if time.Since(start) >= within {
				t.Fatalf("%s: %s answers %d, want %d (after %s)", what, base, code, want, time.Since(start))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return time.Since(start)
}

// GRABBER_AUTH contradicting the token stops the grabber at start: exit 2,
// a message naming GRABBER_AUTH, never the token.
func TestAuthModeRefused(t *testing.T) {
	t.Parallel()
	const token = "hunter2x-token"
	for _, env := range [][]string{
		{"GRABBER_AUTH=keys", "GRABBER_API_TOKEN=" + token},
		{"GRABBER_AUTH=none", "GRABBER_API_TOKEN=" + token},
		{"GRABBER_AUTH=token", "GRABBER_API_TOKEN="},
		{"GRABBER_AUTH=apikeys", "GRABBER_API_TOKEN="},
		{"ACCESS_LOG=yes"},
		{"METRICS_ADDR=9100"},
	} {
		e := append(append([]string{}, settingsOff...), "DATABASE_URL=postgres://u@127.0.0.1:1/x",
			"GRABBER_ADDR="+freeAddr(t), "GRABBER_AUTH=", "ACCESS_LOG=", "METRICS_ADDR=")
		code, stdout, stderr := runOut(t, "grabber", append(e, env...))
		name, _, _ := strings.Cut(env[0], "=")
		if code != 2 || !strings.Contains(stderr, name) || strings.Contains(stdout+stderr, token) {
			t.Errorf("grabber with %q: exit %d, stderr %q; want 2, naming %s, without the token", env, code, stderr, name)
		}
	}
}

// With METRICS_ADDR the grabber serves /metrics there and no longer on its
// API port; the flusher keeps serving its own on FLUSHER_ADDR. A metrics
// address that cannot be listened on stops the grabber.
func TestMetricsListener(t *testing.T) {
	t.Parallel()
	dbURL := testenv.PostgresURL(t)
	_, prefix := testenv.Redis(t)
	metricsAddr := freeAddr(t)
	s := startStackWith(t, dbURL, testenv.RedisURL(t), prefix, "METRICS_ADDR="+metricsAddr)
	if code, _ := get(t, s.base+"/metrics", ""); code != http.StatusNotFound {
		t.Errorf("GET /metrics on the API port with METRICS_ADDR set: %d, want 404", code)
	}
	grabber := scrape(t, "http://"+metricsAddr+"/metrics")
	if !strings.Contains(grabber, "redpacket_grabs_total") || strings.Contains(grabber, "redpacket_flush_") {
		t.Errorf("the grabber's metrics listener serves:\n%.500s", grabber)
	}
	if code, _ := get(t, "http://"+metricsAddr+"/v1/envelopes/1", ""); code != http.StatusNotFound {
		t.Errorf("the API on the metrics listener: %d, want 404", code)
	}
	if !strings.Contains(scrape(t, s.flusherURL+"/metrics"), "redpacket_flush_errors_total") {
		t.Error("the flusher no longer serves its metrics on FLUSHER_ADDR")
	}
	// The metrics address is taken (by the running grabber): a second one stops.
	code, stdout, stderr := runOut(t, "grabber", append(s.env, "GRABBER_ADDR="+freeAddr(t), "METRICS_ADDR="+metricsAddr))
	out := stdout + stderr
	if code != 1 || !strings.Contains(out, metricsAddr) {
		t.Errorf("a grabber whose METRICS_ADDR is taken: exit %d, want 1 naming the address:\n%s", code, out)
	}
	// Its API address taken, it stops too, its metrics listener with it.
	apiAddr := strings.TrimPrefix(s.base, "http://")
	code, stdout, stderr = runOut(t, "grabber", append(s.env, "GRABBER_ADDR="+apiAddr, "METRICS_ADDR="+freeAddr(t)))
	out = stdout + stderr
	if code != 1 || !strings.Contains(out, apiAddr) {
		t.Errorf("a grabber whose GRABBER_ADDR is taken: exit %d, want 1 naming the address:\n%s", code, out)
	}
	s.stop(t)
}
