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
	cmd := devenvCommand(bin, grabberAddr, flusherAddr)
	summary, exited := startDevenv(t, cmd)
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
	addrs, dirs := devenvServers(t, text)
	if len(addrs) != 2 || !strings.Contains(text, "curl -s -XPOST http://"+grabberAddr+"/v1/envelopes") {
		t.Fatalf("devenv did not name a throwaway PostgreSQL and Redis and a first curl:\n%s", text)
	}
	createAndGrabOnce(t, "http://"+grabberAddr)

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
	assertDevenvGone(t, cmd.Process.Pid, append(addrs, grabberAddr, flusherAddr), dirs)
}

// devenvCommand is devenv with none of the service's addresses in its
// environment but the daemons' listening addresses, in a process group of
// its own.
func devenvCommand(bin, grabberAddr, flusherAddr string) *exec.Cmd {
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
	return cmd
}

// startDevenv starts cmd. The summary channel gets what devenv prints up to
// the first empty line after "Try:"; exited gets its exit, and whoever takes
// it puts it back for the cleanup, which kills the group and logs devenv's
// stderr if the test failed.
func startDevenv(t *testing.T, cmd *exec.Cmd) (summary <-chan string, exited chan error) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{} // read once devenv has exited
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan error, 1)
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err := <-exited
		if t.Failed() {
			t.Logf("devenv (exit %v) logs:\n%s", err, logs.String())
		}
	})
	said := make(chan string, 1)
	go func() {
		var b strings.Builder
		try := false // the summary ends with the first empty line after "Try:"
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			try = try || strings.HasPrefix(sc.Text(), "Try:")
			if try && sc.Text() == "" {
				said <- b.String()
				try = false
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	return said, exited
}

// devenvServers is the addresses and directories of the throwaway servers
// devenv's summary names.
func devenvServers(t *testing.T, text string) (addrs, dirs []string) {
	t.Helper()
	for _, m := range regexp.MustCompile(`export (DATABASE_URL|REDIS_URL)='([^']+)'\s+\(throwaway server in (\S+),`).FindAllStringSubmatch(text, -1) {
		u, err := url.Parse(m[2])
		if err != nil {
			t.Fatal(err)
		}
		addrs, dirs = append(addrs, u.Host), append(dirs, m[3])
	}
	return addrs, dirs
}

// createAndGrabOnce creates an envelope at the grabber base and grabs a
// packet of it.
func createAndGrabOnce(t *testing.T, base string) {
	t.Helper()
	var created struct {
		EnvelopeID int64 `json:"envelope_id"`
	}
	if code := call(t, "POST", base+"/v1/envelopes", "", `{"sender_id":"alice","total_cents":1000,"count":10,"expires_in_seconds":3600}`, &created); code != 200 && code != 201 {
		t.Fatalf("create: %d", code)
	}
	var got struct {
		AmountCents int64 `json:"amount_cents"`
	}
	if code := call(t, "POST", fmt.Sprintf("%s/v1/envelopes/%d/grab", base, created.EnvelopeID), "", `{"user_id":"bob"}`, &got); code != 200 || got.AmountCents <= 0 {
		t.Fatalf("grab: %d %+v", code, got)
	}
}

// assertDevenvGone fails the test if anything listens on addrs, a directory
// of dirs is still there, or a process of the group pgid still runs.
func assertDevenvGone(t *testing.T, pgid int, addrs, dirs []string) {
	t.Helper()
	for _, a := range addrs {
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
	if out, err := exec.Command("pgrep", "-g", fmt.Sprint(pgid)).Output(); err == nil {
		t.Errorf("processes of devenv's group still running: %s", out)
	}
}
