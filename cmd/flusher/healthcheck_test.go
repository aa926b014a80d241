package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"redpacket/internal/config"
)

// fakeDaemonEnv makes the test binary a stand-in daemon: it answers GET
// /healthz with 200 on the address it names until killed. Run with argv
// ["grabber"] or ["flusher"], it looks like that daemon in /proc.
const fakeDaemonEnv = "FLUSHER_TEST_FAKE_DAEMON_ADDR"

func TestMain(m *testing.M) {
	if addr := os.Getenv(fakeDaemonEnv); addr != "" {
		http.HandleFunc("/healthz", func(http.ResponseWriter, *http.Request) {})
		_ = http.ListenAndServe(addr, nil)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// Against a real process: one looking like the grabber (its /proc entry
// alone in the proc searched, so that daemons of other tests are not
// seen), answering on GRABBER_ADDR, is healthy by -running although
// nothing answers on FLUSHER_ADDR (the plain check, the flusher's, fails);
// once it is gone, -running fails too.
func TestHealthcheckRunningProbesTheGrabber(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("no /proc:", err)
	}
	grabberAddr, flusherAddr := freeAddr(t), freeAddr(t)
	cfg, err := config.Load(func(k string) string {
		return map[string]string{"GRABBER_ADDR": grabberAddr, "FLUSHER_ADDR": flusherAddr}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	grabber := &exec.Cmd{Path: self, Args: []string{"grabber"}, Env: append(os.Environ(), fakeDaemonEnv+"="+grabberAddr)}
	if err := grabber.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = grabber.Process.Kill(); _ = grabber.Wait() }()
	proc := t.TempDir()
	pid := strconv.Itoa(grabber.Process.Pid)
	if err := os.Symlink(filepath.Join("/proc", pid), filepath.Join(proc, pid)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for err = checkHealth(cfg, proc); err != nil && time.Now().Before(deadline); err = checkHealth(cfg, proc) {
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("-running with a grabber up: %v", err)
	}
	if err := checkHealth(cfg, ""); err == nil {
		t.Error("the flusher's check passed with no flusher")
	}
	_ = grabber.Process.Kill()
	_ = grabber.Wait()
	if err := checkHealth(cfg, proc); err == nil || !strings.Contains(err.Error(), "no grabber or flusher daemon") {
		t.Errorf("-running with no daemon: %v", err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
