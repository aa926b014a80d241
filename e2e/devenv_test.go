package e2e_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// `make dev` on a machine with nothing running: devenv starts PostgreSQL
// and Redis of its own, the schema, a grabber and a flusher, and says
// where they are; the service answers; a Ctrl-C (SIGINT to the terminal's
// process group) stops all of it: devenv exits 0, nothing listens any more
// and the servers' directories are gone.
func TestDevenvRunsAndStopsOnCtrlC(t *testing.T) {
	t.Parallel()
	bin := binaries(t)
	grabberAddr, flusherAddr := freeAddr(t), freeAddr(t)
	cmd := exec.Command(filepath.Join(bin, "devenv"))
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains([]string{"DATABASE_URL", "REDIS_URL", "REDIS_CLUSTER_ADDRS", "GRABBER_ADDR", "FLUSHER_ADDR"}, name) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GRABBER_ADDR="+grabberAddr, "FLUSHER_ADDR="+flusherAddr)
	// A process group of its own, as a shell gives a foreground job: the
	// SIGINT below reaches devenv and the daemons, as Ctrl-C would.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{} // read once devenv has exited
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err := <-exited
		if t.Failed() {
			t.Logf("devenv (exit %v) logs:\n%s", err, logs.String())
		}
	})
	summary := make(chan string, 1)
	go func() {
		var b strings.Builder
		try := false // the summary ends with the first empty line after "Try:"
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			try = try || strings.HasPrefix(sc.Text(), "Try:")
			if try && sc.Text() == "" {
				summary <- b.String()
				try = false
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	var text string
	select {
	case text = <-summary:
	case err := <-exited:
		exited <- err
		t.Fatalf("devenv exited before it was running: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("devenv not running after 2 minutes")
	}
	t.Logf("devenv says:\n%s", text)

	// Where its servers are, from what it printed.
	var addrs, dirs []string
	for _, m := range regexp.MustCompile(`export (DATABASE_URL|REDIS_URL)='([^']+)'\s+\(throwaway server in (\S+),`).FindAllStringSubmatch(text, -1) {
		u, err := url.Parse(m[2])
		if err != nil {
			t.Fatal(err)
		}
		addrs, dirs = append(addrs, u.Host), append(dirs, m[3])
	}
	if len(addrs) != 2 || !strings.Contains(text, "curl -s -XPOST http://"+grabberAddr+"/v1/envelopes") {
		t.Fatalf("devenv did not name a throwaway PostgreSQL and Redis and a first curl:\n%s", text)
	}

	var created struct {
		EnvelopeID int64 `json:"envelope_id"`
	}
	base := "http://" + grabberAddr
	if code := call(t, "POST", base+"/v1/envelopes", "", `{"sender_id":"alice","total_cents":1000,"count":10,"expires_in_seconds":3600}`, &created); code != 200 && code != 201 {
		t.Fatalf("create: %d", code)
	}
	var got struct {
		AmountCents int64 `json:"amount_cents"`
	}
	if code := call(t, "POST", fmt.Sprintf("%s/v1/envelopes/%d/grab", base, created.EnvelopeID), "", `{"user_id":"bob"}`, &got); code != 200 || got.AmountCents <= 0 {
		t.Fatalf("grab: %d %+v", code, got)
	}

	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("devenv after Ctrl-C: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("devenv still running a minute after Ctrl-C")
	}
	// devenv waited for all of it before exiting: nothing is left now.
	for _, a := range append(addrs, grabberAddr, flusherAddr) {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still listening after devenv exited", a)
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still there after devenv exited (%v)", d, err)
		}
	}
	if out, err := exec.Command("pgrep", "-g", fmt.Sprint(cmd.Process.Pid)).Output(); err == nil {
		t.Errorf("processes of devenv's group still running: %s", out)
	}
}
