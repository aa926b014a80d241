// Package throwaway starts servers of a process's own: PostgreSQL (initdb +
// postgres), Redis and a Redis Cluster, on free loopback ports, each in a
// temporary directory that holds everything it writes. They are stopped and
// their directory removed when the process stops them or ends, however it
// ends (returns, panics, is killed by a timeout or SIGKILL).
//
// The tests (internal/testenv) use them when the environment names no
// server and no Docker engine is reachable; `make dev` (cmd/devenv) uses
// them when DATABASE_URL or REDIS_URL is not set. The programs are found on
// PATH (PostgreSQL's also under /usr/lib/postgresql/*/bin).
package throwaway

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// supervisorScript runs the servers of one directory and removes them when
// the process that started it is done. Its standard input is a pipe whose
// only write end that process holds (Go opens files close-on-exec, so no
// other child inherits it): the kernel closes that end when the process
// exits, however it exits, the read loop below ends, the servers are
// stopped (SIGKILL after 10 s) and the directory removed. It runs in a
// process group of its own, so a Ctrl-C meant for the process does not stop
// it before it has cleaned up.
//
// Each server <name> runs "$dir/<name>/run" (a script ending in exec, so
// the pid is the server's). Commands, one a line: "start <name>" (answers
// "started <name> <pid>") and "reap <name>" (waits for a server the caller
// killed, so its pid is never signalled again; answers "reaped <name>").
// A killed server stays a zombie until reaped, so its pid is not reused.
//
// $1 directory, $2 signal that stops a server (TERM, INT...), then the
// servers to start at once.
const supervisorScript = `dir=$1; sig=$2; shift 2
names=
run() {
  sh "$dir/$1/run" </dev/null >>"$dir/$1/out.log" 2>&1 &
  eval "pid_$1=$!"
  case " $names " in *" $1 "*) ;; *) names="$names $1" ;; esac
  echo "started $1 $!"
}
for name in "$@"; do run "$name"; done
while read -r cmd name; do
  case $cmd in
  start) run "$name" ;;
  reap) eval "p=\$pid_$name"; [ -n "$p" ] && wait "$p"; eval "pid_$name="; echo "reaped $name" ;;
  esac
done
pids=
for name in $names; do eval "pids=\"\$pids \$pid_$name\""; done
if [ -n "$pids" ]; then
  kill -"$sig" $pids 2>/dev/null
  (sleep 10; kill -9 $pids) >/dev/null 2>&1 &
  killer=$!
  wait $pids
  kill $killer 2>/dev/null
fi
rm -rf "$dir"
`

// supervisor is a running supervisorScript.
type supervisor struct {
	dir     string
	cmd     *exec.Cmd
	lease   *os.File    // write end of its standard input: the servers live while it is open
	replies chan string // its answers, one a line

	mu   sync.Mutex // one command at a time
	pids map[string]int
	done chan struct{} // closed once the supervisor has exited
	err  error         // its exit, once done is closed
}

// live keeps every running supervisor reachable for the life of the
// process: were a lease collected, its finalizer would close it and stop the
// servers under their users.
var live struct {
	sync.Mutex
	all map[*supervisor]bool
}

// startSupervisor starts a supervisor for dir, which it removes at the end,
// running as cred (nil: this process's user), with the servers named
// started at once.
func startSupervisor(dir, stopSignal string, cred *syscall.Credential, names ...string) (*supervisor, error) {
	if _, err := exec.LookPath("sh"); err != nil {
		return nil, errors.New("sh is not on PATH")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s := &supervisor{dir: dir, lease: w, replies: make(chan string, 16), pids: map[string]int{}, done: make(chan struct{})}
	s.cmd = exec.Command("sh", append([]string{"-c", supervisorScript, "redpacket-throwaway", dir, stopSignal}, names...)...)
	s.cmd.Stdin = r
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	out, err := s.cmd.StdoutPipe()
	if err == nil {
		err = s.cmd.Start()
	}
	_ = r.Close()
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("start the supervisor of %s: %w", dir, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.replies <- sc.Text()
		}
		close(s.replies)
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	live.Lock()
	if live.all == nil {
		live.all = map[*supervisor]bool{}
	}
	live.all[s] = true
	live.Unlock()
	for _, n := range names {
		if err := s.readStarted(n); err != nil {
			_ = s.stop(15 * time.Second)
			return nil, err
		}
	}
	return s, nil
}

// reply waits (up to 10 s) for the next answer and checks it begins with
// want.
func (s *supervisor) reply(want string) (string, error) {
	select {
	case line, ok := <-s.replies:
		if !ok {
			return "", fmt.Errorf("supervisor of %s exited (waiting for %q)", s.dir, want)
		}
		if !strings.HasPrefix(line, want) {
			return "", fmt.Errorf("supervisor of %s answered %q, want %q", s.dir, line, want)
		}
		return line, nil
	case <-time.After(10 * time.Second):
		return "", fmt.Errorf("supervisor of %s: no %q after 10s", s.dir, want)
	}
}

func (s *supervisor) readStarted(name string) error {
	line, err := s.reply("started " + name + " ")
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(line, "started "+name+" "))
	if err != nil {
		return fmt.Errorf("supervisor of %s: %q: %w", s.dir, line, err)
	}
	s.pids[name] = pid
	return nil
}

// start starts the server name ("$dir/name/run") and returns its pid.
func (s *supervisor) start(name string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := fmt.Fprintf(s.lease, "start %s\n", name); err != nil {
		return 0, fmt.Errorf("supervisor of %s: start %s: %w", s.dir, name, err)
	}
	if err := s.readStarted(name); err != nil {
		return 0, err
	}
	return s.pids[name], nil
}

// pid returns the process id of the server name, 0 if it is not running.
func (s *supervisor) pid(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pids[name]
}

// signal sends sig to the server name.
func (s *supervisor) signal(name string, sig syscall.Signal) error {
	pid := s.pid(name)
	if pid == 0 {
		return fmt.Errorf("%s is not running", name)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signal %v to %s (pid %d): %w", sig, name, pid, err)
	}
	return nil
}

// kill SIGKILLs the server name and waits until the supervisor has reaped it.
func (s *supervisor) kill(name string) error {
	if err := s.signal(name, syscall.SIGKILL); err != nil {
		return err
	}
	return s.reap(name)
}

// reap waits for the server name, which must have exited or be exiting.
func (s *supervisor) reap(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := fmt.Fprintf(s.lease, "reap %s\n", name); err != nil {
		return fmt.Errorf("supervisor of %s: reap %s: %w", s.dir, name, err)
	}
	if _, err := s.reply("reaped " + name); err != nil {
		return err
	}
	delete(s.pids, name)
	return nil
}

// exited reports whether the server name has exited (it is a zombie
// waiting to be reaped, or gone). On systems without /proc it says no.
func (s *supervisor) exited(name string) bool {
	pid := s.pid(name)
	if pid == 0 {
		return true
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if os.IsNotExist(err) {
		_, statErr := os.Stat("/proc/self/stat")
		return statErr == nil
	}
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces, the state follows the last ')'.
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// stop closes the lease and waits (up to d) for the supervisor to have
// stopped the servers and removed the directory.
func (s *supervisor) stop(d time.Duration) error {
	_ = s.lease.Close()
	defer func() {
		live.Lock()
		delete(live.all, s)
		live.Unlock()
	}()
	select {
	case <-s.done:
		if s.err != nil {
			return fmt.Errorf("supervisor of %s: %w", s.dir, s.err)
		}
		return nil
	case <-time.After(d):
		return fmt.Errorf("supervisor of %s (pid %d) still running %s after it was told to stop", s.dir, s.cmd.Process.Pid, d)
	}
}

// writeRun writes the script that runs the server name: the command line
// args, each quoted for sh, run with exec.
func writeRun(dir, name string, cred *syscall.Credential, args ...string) error {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	sub := filepath.Join(dir, name)
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return err
	}
	if err := chown(sub, cred); err != nil {
		return err
	}
	run := filepath.Join(sub, "run")
	if err := os.WriteFile(run, []byte("exec "+strings.Join(quoted, " ")+"\n"), 0o755); err != nil {
		return err
	}
	return chown(run, cred)
}

// chown gives path to cred's user (nothing when cred is nil).
func chown(path string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	return os.Chown(path, int(cred.Uid), int(cred.Gid))
}

// logTail returns the last n lines of the file, for an error message.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
