package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"redpacket/internal/apispec"
)

// The version and commit the binaries are built with.
const e2eVersion, e2eCommit = "v0.0.0-e2e", "0123456789abcdef"

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds every command under cmd/ once per test process.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "redpacket-e2e-")
		if buildErr != nil {
			return
		}
		// Named as a release build names them (the Makefile), so that
		// -version can be checked.
		cmd := exec.Command("go", "build", "-ldflags", "-X redpacket/internal/telemetry.version="+e2eVersion+
			" -X redpacket/internal/telemetry.commit="+e2eCommit, "-o", binDir+"/", "redpacket/cmd/...")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// proc is a running daemon whose output goes to the test log on failure.
type proc struct {
	cmd *exec.Cmd
	out *lockedBuffer
}

// lockedBuffer collects a process's output; a test may read it while the
// process still writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func start(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(binaries(t), bin), args...)
	cmd.Env = append(os.Environ(), env...)
	p := &proc{cmd: cmd, out: &lockedBuffer{}}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", bin, p.out)
		}
	})
	return p
}

// run runs a command to completion and returns its exit code and output.
func run(t *testing.T, bin string, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binaries(t), bin), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// stop sends SIGTERM and waits: the daemon must exit 0 within 10 s.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s exited with %v after SIGTERM", p.cmd.Path, err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("%s still running 10s after SIGTERM", p.cmd.Path)
	}
}

// handedOut is every port freeAddr has returned in this process.
var handedOut sync.Map

// freeAddr is a loopback address for a daemon to listen on: a port free now,
// never returned before in this process, from 2000-9999, below Linux's
// ephemeral range (where the kernel picks ports for ":0" listeners and
// outgoing connections, so neither can take it before the daemon binds it)
// and below the throwaway servers' 10000-31999.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 1000 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(2000+rand.IntN(8000)))
		if _, taken := handedOut.LoadOrStore(addr, true); taken {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		_ = ln.Close()
		return addr
	}
	t.Fatal("no free loopback port in 2000-9999")
	return ""
}

// waitReady polls url until it answers 200 or 15 s pass.
func waitReady(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s not ready after 15s", url)
}

// call does a JSON request and decodes the answer into out (when not nil).
func call(t *testing.T, method, url, token, body string, out any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// Every exchange is checked against the API's contract.
	resp, err := (&http.Client{Transport: apispec.Transport(t, http.DefaultTransport, false)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, url, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}
