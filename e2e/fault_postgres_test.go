package e2e_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/testenv"
)

// pgCluster is a PostgreSQL server of the test's own, which the test stops
// and starts; the shared test server is never touched.
type pgCluster struct {
	bin      string // directory of initdb, pg_ctl
	base     string // owned by the server's user: data, socket, log
	port     string
	runAs    string // "postgres" when the test runs as root (the server refuses root)
	initTook time.Duration
}

// pgBinDir returns the bin directory of the newest PostgreSQL under
// /usr/lib/postgresql that has initdb and pg_ctl.
func pgBinDir(t *testing.T) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(d string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
		return v
	}
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if isRegularFile(filepath.Join(d, "initdb")) && isRegularFile(filepath.Join(d, "pg_ctl")) && isRegularFile(filepath.Join(d, "postgres")) {
			return d
		}
	}
	t.Fatal("no PostgreSQL server binaries (initdb, pg_ctl, postgres) under /usr/lib/postgresql/*/bin: " +
		"install the server package (e.g. apt-get install postgresql-15) to run the PostgreSQL fault test")
	return ""
}

func isRegularFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// startPGCluster makes a new cluster (trust authentication, no fsync) in a
// directory of its own and starts it on a free loopback port. It is stopped
// (immediately) and removed when the test ends.
func startPGCluster(t *testing.T) *pgCluster {
	t.Helper()
	c := &pgCluster{bin: pgBinDir(t)}
	base, err := os.MkdirTemp("", "rp-fault-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c.base = base
	t.Cleanup(func() { os.RemoveAll(base) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root: PostgreSQL refuses root and there is no user postgres to run it as (%v); "+
				"create one (useradd postgres) or run the tests as another user", err)
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			t.Fatal("running as root: runuser (util-linux) is needed to run PostgreSQL as user postgres; install util-linux")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(base, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.runAs = "postgres"
	}
	_, c.port, _ = net.SplitHostPort(freeAddr(t))
	began := time.Now()
	if out, err := c.command("initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	c.initTook = time.Since(began)
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(base, "log")); err == nil {
				t.Logf("private postgres log:\n%s", b)
			}
		}
		_, _ = c.command("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop").CombinedOutput()
	})
	c.start(t)
	return c
}

func (c *pgCluster) data() string { return filepath.Join(c.base, "data") }

// command runs one of the cluster's binaries, as the server's user when the
// test runs as root, in the cluster's directory (which that user can read).
func (c *pgCluster) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.runAs != "" {
		cmd = exec.Command("runuser", append([]string{"-u", c.runAs, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = c.base
	return cmd
}

func (c *pgCluster) start(t *testing.T) {
	t.Helper()
	opts := fmt.Sprintf("-p %s -k %s -c listen_addresses=127.0.0.1 -c fsync=off", c.port, c.base)
	out, err := c.command("pg_ctl", "-D", c.data(), "-w", "-t", "60", "-l", filepath.Join(c.base, "log"), "-o", opts, "start").CombinedOutput()
	if err != nil {
		t.Fatalf("pg_ctl start: %v\n%s", err, out)
	}
}

// stopImmediate stops the server the hard way: no checkpoint, connections
// cut; the next start recovers from the WAL.
func (c *pgCluster) stopImmediate(t *testing.T) {
	t.Helper()
	out, err := c.command("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop").CombinedOutput()
	if err != nil {
		t.Fatalf("pg_ctl stop -m immediate: %v\n%s", err, out)
	}
}

func (c *pgCluster) url(db string) string {
	return "postgres://postgres@127.0.0.1:" + c.port + "/" + db + "?sslmode=disable"
}

// createDB creates an empty database and returns its URL.
func (c *pgCluster) createDB(t *testing.T, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		t.Fatalf("connect to the private postgres: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return c.url(name)
}

// PostgreSQL is stopped (immediate mode: connections cut, no checkpoint)
// under a grab load and started again 3 s later. Grabs of open envelopes
// need only Redis, so they are still answered 200 during the outage; the
// flusher retries with its batch in flight and writes everything once the
// server is back. PostgreSQL ends with every answered grab exactly once, no
// claim conflicts, and the audit passes; both daemons stop cleanly.
func TestFaultPostgresStop(t *testing.T) {
	t.Parallel()
	pg := startPGCluster(t)
	dbURL := pg.createDB(t, "redpacket")
	_, prefix := testenv.Redis(t)
	s := startStack(t, dbURL, testenv.RedisURL(t), prefix) // the flusher migrates the new database
	_, ids := s.createEnvelopes(t, 3600, 2000, 3000, 4000, 6000)
	t.Logf("private postgres %s made in %s", pg.port, pg.initTook.Round(time.Millisecond))

	load := startLoad(t, s.base, ids, loadSpec{Workers: 8, For: 6 * time.Second, Max: 40000, Pace: 2 * time.Millisecond, Tag: "p"})
	time.Sleep(1500 * time.Millisecond) // load before the fault
	pg.stopImmediate(t)
	stopped := time.Now()
	time.Sleep(3 * time.Second) // the outage
	restart := time.Now()
	pg.start(t)
	back := time.Now()
	log := load.wait()
	log.resolve(s.base, 10*time.Second)
	t.Logf("postgres stopped at %s, restarted %s (up after %s); load: %s", stopped.Format("15:04:05.000"),
		restart.Format("15:04:05.000"), back.Sub(restart).Round(time.Millisecond), log.summary())

	during := 0
	for _, e := range log.eventsCopy() {
		if e.Status == 200 && !e.Repeat && e.Sent.After(stopped) && e.Got.Before(restart) {
			during++
		}
	}
	if during == 0 {
		t.Error("no grab was granted while postgres was down")
	}
	t.Logf("%d grabs granted while postgres was down", during)
	for k, n := range log.counts() {
		// A sold-out envelope the flusher has settled answers expired.
		if k != "200" && k != "200 repeat" && k != "409 sold_out" && k != "409 expired" {
			t.Errorf("%d grabs answered %s; only postgres was down, which grabs of open envelopes do not need", n, k)
		}
	}
	assertLedger(t, s, ledgerSpec{Envelopes: ids, Logs: []*loadLog{log}})
	db := connectTestDB(t, dbURL)
	assertNoConflicts(t, db)
	t.Logf("envelopes by status: %v", envelopeStatusCounts(t, db, ids))
	s.stop(t)
}
