package throwaway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// postgresConf is appended to the new cluster's postgresql.conf: TCP on
// loopback only (no Unix socket, whose default directory may not be
// writable), and no durability, which a server deleted at the end does not
// need.
const postgresConf = `
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 32MB
max_connections = 200
`

// StartPostgres initialises a database cluster in a new temporary directory
// with initdb and runs postgres on it, on a free loopback port, with the
// superuser "postgres" and trust authentication. Its URL names the database
// "postgres". PostgreSQL refuses to run as root: when this process is
// root, both run as the user "postgres", or "nobody" if there is none.
func StartPostgres(ctx context.Context) (*Server, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	return attempts(ctx, "PostgreSQL", func() (*Server, error) { return tryPostgres(ctx, bin, cred) })
}

func tryPostgres(ctx context.Context, bin string, cred *syscall.Credential) (*Server, error) {
	ports, err := FreePorts(1, false)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redpacket-pg-")
	if err != nil {
		return nil, err
	}
	if err := chown(dir, cred); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	sup, err := startSupervisor(dir, "INT", cred)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Dir: dir, name: "pg", sup: sup,
		URL: "postgres://postgres@" + addr(ports[0]) + "/postgres?sslmode=disable"}
	if err := s.initPostgres(ctx, bin, ports[0], cred); err != nil {
		_ = sup.stop(15 * time.Second)
		return nil, err
	}
	return s, nil
}

// initPostgres runs initdb, then postgres, and waits until it accepts
// connections.
func (s *Server) initPostgres(ctx context.Context, bin string, port int, cred *syscall.Credential) error {
	data := filepath.Join(s.Dir, s.name, "data")
	if err := writeRun(s.Dir, s.name, cred, filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port)); err != nil {
		return err
	}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		hint := ""
		if cred != nil {
			hint = fmt.Sprintf(" (as uid %d, since PostgreSQL refuses to run as root: the directory %s must be reachable by that user; set TMPDIR to one that is)", cred.Uid, s.Dir)
		}
		return fmt.Errorf("initdb%s: %v\n%s", hint, err, out)
	}
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(postgresConf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	pid, err := s.sup.start(s.name)
	if err != nil {
		return err
	}
	err = waitUp(ctx, s.sup, s.name, time.Minute, func() (bool, error) { return postmasterReady(data, pid, port), nil })
	if err != nil {
		return err
	}
	// Ready by its own account; one query to be sure it serves.
	c, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		return fmt.Errorf("connect to the new server: %w", err)
	}
	return c.Close(ctx)
}

// postmasterReady reads the server's postmaster.pid: it is ready once the
// file names its pid and port and says "ready". Reading the file, not
// probing the port, never mistakes another server on the port for ours.
func postmasterReady(data string, pid, port int) bool {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return false
	}
	// pid, data directory, start time, port, socket directory, listen
	// address, shared memory key, status.
	lines := strings.Split(string(b), "\n")
	return len(lines) >= 8 && strings.TrimSpace(lines[0]) == strconv.Itoa(pid) &&
		strings.TrimSpace(lines[3]) == strconv.Itoa(port) && strings.TrimSpace(lines[7]) == "ready"
}

// postgresBin finds the directory holding initdb and postgres: where the
// initdb on PATH lives, else the newest /usr/lib/postgresql/*/bin (Debian
// and Ubuntu install them there, off PATH).
func postgresBin() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(d string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return n
	}
	slices.SortFunc(found, func(a, b string) int { return version(b) - version(a) })
	dirs = append(dirs, found...)
	for _, d := range dirs {
		if executable(filepath.Join(d, "initdb")) && executable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errors.New("initdb and postgres are neither on PATH nor under /usr/lib/postgresql/*/bin " +
		"(install PostgreSQL's server programs, e.g. apt-get install postgresql)")
}

func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// serverUser returns the user PostgreSQL runs as: nil (this process's)
// unless this process is root, which PostgreSQL refuses to be; then
// "postgres", or "nobody" if there is none.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
	}
	return nil, errors.New("PostgreSQL refuses to run as root, and there is no user postgres or nobody to run it as: run the tests as another user")
}
