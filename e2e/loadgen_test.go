package e2e_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"redpacket/internal/testenv"
)

// loadgenResult is the part of `loadgen -json` the smoke test reads.
type loadgenResult struct {
	Grabs       int64 `json:"grabs"`
	RepeatGrabs int64 `json:"repeat_grabs"`
	Granted     int64 `json:"granted"`
	AllSoldOut  bool  `json:"all_sold_out"`
	Errors      int64 `json:"errors"`
	Envelopes   []struct {
		ID           int64 `json:"envelope_id"`
		Packets      int   `json:"packets"`
		TotalCents   int64 `json:"total_cents"`
		Granted      int   `json:"granted"`
		GrantedCents int64 `json:"granted_cents"`
		SoldOut      bool  `json:"sold_out"`
	} `json:"envelopes"`
	Flush *struct {
		Claims   int  `json:"claims"`
		Seen     int  `json:"seen"`
		Complete bool `json:"complete"`
		PGClaims int  `json:"pg_claims"`
	} `json:"flush"`
	Checked    bool     `json:"checked"`
	Violations int      `json:"violation_count"`
	Texts      []string `json:"violations"`
	OK         bool     `json:"ok"`
}

// runLoadgen runs the load tool to completion, bounded by a minute, and
// returns its exit code, its standard output (one JSON object with -json)
// and its standard error, kept apart so the JSON can be decoded.
func runLoadgen(t *testing.T, args ...string) (int, []byte, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binaries(t), "loadgen"), args...)
	cmd.Env = os.Environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), stdout.Bytes(), stderr.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, stdout.Bytes(), stderr.String()
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		killed := <-done
		t.Fatalf("loadgen still running after a minute (killed: %v); stderr:\n%s", killed, stderr.String())
		return 0, nil, ""
	}
}

// A small, bounded load through both daemons: every envelope sells out, no
// answer breaks a promise, and PostgreSQL ends up holding exactly the
// granted claims. Correctness only; the figures are not checked.
func TestLoadgenSmoke(t *testing.T) {
	t.Parallel()
	dbURL := testenv.PostgresURL(t)
	_, prefix := testenv.Redis(t)
	grabberAddr, flusherAddr := freeAddr(t), freeAddr(t)
	const token = "load-s3cret"
	env := []string{
		"DATABASE_URL=" + dbURL, "REDIS_URL=" + testenv.RedisURL(t), "REDIS_KEY_PREFIX=" + prefix,
		"GRABBER_ADDR=" + grabberAddr, "FLUSHER_ADDR=" + flusherAddr, "GRABBER_API_TOKEN=" + token,
	}
	flusher := start(t, "flusher", env)
	grabber := start(t, "grabber", env)
	waitReady(t, "http://"+grabberAddr+"/readyz")
	waitReady(t, "http://"+flusherAddr+"/readyz")

	code, stdout, stderr := runLoadgen(t, "-url", "http://"+grabberAddr, "-token", token, "-json",
		"-database-url", dbURL, "-envelopes", "3", "-packets", "200", "-total-cents", "20000",
		"-users", "16", "-grabs", "1000", "-repeat", "0.2", "-duration", "20s", "-flush-timeout", "20s")
	var r loadgenResult
	if err := json.Unmarshal(stdout, &r); err != nil {
		t.Fatalf("loadgen exit %d, stdout is not one JSON object: %v\n%s\nstderr:\n%s", code, err, stdout, stderr)
	}
	if code != 0 || !r.OK || r.Violations != 0 || !r.Checked {
		t.Fatalf("loadgen exit %d, ok %v, checked %v, violations %q\nstderr:\n%s", code, r.OK, r.Checked, r.Texts, stderr)
	}
	if !r.AllSoldOut || r.Granted != 600 || len(r.Envelopes) != 3 || r.RepeatGrabs == 0 || r.Errors != 0 {
		t.Errorf("sold out %v, granted %d, envelopes %d, repeats %d, errors %d; want all 600 packets granted with repeats and no errors",
			r.AllSoldOut, r.Granted, len(r.Envelopes), r.RepeatGrabs, r.Errors)
	}
	for _, e := range r.Envelopes {
		if !e.SoldOut || e.Granted != e.Packets || e.Packets != 200 || e.GrantedCents != e.TotalCents {
			t.Errorf("envelope %+v: want all 200 packets granted for the whole total", e)
		}
	}
	if f := r.Flush; f == nil || !f.Complete || f.Claims != 600 || f.Seen != 600 || f.PGClaims != 600 {
		t.Errorf("flush %+v: want every one of 600 claims in PostgreSQL", f)
	}
	grabber.stop(t)
	flusher.stop(t)
}

// The no-op reference server answers the load tool, which checks nothing
// against it; both stop cleanly.
func TestLoadgenNoopServer(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	srv := start(t, "loadgen", nil, "noop-server", "-addr", addr)
	waitReady(t, "http://"+addr+"/readyz")
	code, stdout, stderr := runLoadgen(t, "-url", "http://"+addr, "-noop", "-json",
		"-users", "8", "-grabs", "500", "-duration", "10s")
	var r loadgenResult
	if err := json.Unmarshal(stdout, &r); err != nil || code != 0 || r.Grabs != 500 || r.Checked || !r.OK {
		t.Fatalf("loadgen -noop: exit %d, %+v, %v\nstderr:\n%s", code, r, err, stderr)
	}
	srv.stop(t)
}

// A broken deployment is reported: the no-op server pays one packet to every
// user, so without -noop the tool sees a double-paid packet and exits 1.
func TestLoadgenFailsOnViolation(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	srv := start(t, "loadgen", nil, "noop-server", "-addr", addr)
	waitReady(t, "http://"+addr+"/readyz")
	code, stdout, stderr := runLoadgen(t, "-url", "http://"+addr, "-json", "-users", "4", "-grabs", "50")
	var r loadgenResult
	if err := json.Unmarshal(stdout, &r); err != nil || code != 1 || r.OK || r.Violations == 0 {
		t.Fatalf("loadgen against fake answers without -noop: exit %d, %+v, %v\nstderr:\n%s", code, r, err, stderr)
	}
	srv.stop(t)
}
