package e2e_test

// Helpers of the fault tests (fault_*_test.go): a deployment of both daemons,
// a grab load that remembers every answer, and the ledger check that compares
// the answers with PostgreSQL.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// faultEnv is the daemons' environment for a fault test: its own database,
// Redis and key prefix, loopback addresses, and short flusher pauses so that
// recovery is quick. Settings a developer may have exported are overridden.
func faultEnv(dbURL, redisURL, prefix, grabberAddr, flusherAddr string) []string {
	return []string{
		"DATABASE_URL=" + dbURL, "REDIS_URL=" + redisURL, "REDIS_CLUSTER_ADDRS=", "REDIS_KEY_PREFIX=" + prefix,
		"GRABBER_ADDR=" + grabberAddr, "FLUSHER_ADDR=" + flusherAddr, "GRABBER_API_TOKEN=", "GRABBER_AUTH=",
		"ACCESS_LOG=", "METRICS_ADDR=",
		"LOG_LEVEL=info", "FLUSH_IDLE_WAIT=20ms", "FLUSH_MAX_BACKOFF=500ms", "SETTLE_EVERY=250ms",
	}
}

// faultStack is a running deployment: a flusher and a grabber.
type faultStack struct {
	db         string
	env        []string
	base       string // the grabber's API
	flusherURL string // the flusher's probes
	flusher    *proc
	grabber    *proc
}

// startStack starts the flusher (which migrates the database), waits until it
// is ready, then starts the grabber and waits for it too.
func startStack(t *testing.T, dbURL, redisURL, prefix string) *faultStack {
	t.Helper()
	grabberAddr, flusherAddr := freeAddr(t), freeAddr(t)
	s := &faultStack{
		db:         dbURL,
		env:        faultEnv(dbURL, redisURL, prefix, grabberAddr, flusherAddr),
		base:       "http://" + grabberAddr,
		flusherURL: "http://" + flusherAddr,
	}
	s.flusher = start(t, "flusher", s.env)
	waitReady(t, s.flusherURL+"/readyz")
	s.grabber = start(t, "grabber", s.env)
	waitReady(t, s.base+"/readyz")
	return s
}

// stop sends SIGTERM to the grabber, then the flusher: each must exit 0.
func (s *faultStack) stop(t *testing.T) {
	t.Helper()
	s.grabber.stop(t)
	s.flusher.stop(t)
}

// audit runs `flusher audit -all` and fails the test unless it exits 0, or
// 3 exactly when it reports suspended envelopes (and no violation).
func (s *faultStack) audit(t *testing.T) {
	t.Helper()
	code, out := run(t, "flusher", s.env, "audit", "-all")
	suspended := strings.Contains(out, "SUSPENDED envelope")
	if (code != 0 && code != 3) || (code == 3) != suspended {
		t.Errorf("flusher audit -all: exit %d (suspended envelopes listed: %v):\n%s", code, suspended, out)
		return
	}
	t.Logf("flusher audit -all: %s", firstLineOf(out))
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// killAndReap SIGKILLs a daemon and waits for it. A daemon that had already
// exited on its own is an error.
func killAndReap(t *testing.T, p *proc) {
	t.Helper()
	_ = p.cmd.Process.Kill()
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return
		}
	}
	t.Errorf("%s had exited on its own before SIGKILL (%v):\n%s", p.cmd.Path, err, p.out)
}

type createdEnvelope struct {
	EnvelopeID int64     `json:"envelope_id"`
	TotalCents int64     `json:"total_cents"`
	Count      int       `json:"count"`
	Status     string    `json:"status"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// createEnvelope creates an envelope of count packets worth 100 cents each on
// average, and fails the test unless it is open.
func (s *faultStack) createEnvelope(t *testing.T, count int, expiresIn int) createdEnvelope {
	t.Helper()
	var c createdEnvelope
	body := fmt.Sprintf(`{"sender_id":"fault-sender","total_cents":%d,"count":%d,"expires_in_seconds":%d}`,
		100*count, count, expiresIn)
	if code := call(t, "POST", s.base+"/v1/envelopes", "", body, &c); code != 201 || c.Status != "open" {
		t.Fatalf("create envelope: %d %+v", code, c)
	}
	return c
}

func (s *faultStack) createEnvelopes(t *testing.T, expiresIn int, counts ...int) ([]createdEnvelope, []int64) {
	t.Helper()
	var es []createdEnvelope
	var ids []int64
	for _, n := range counts {
		e := s.createEnvelope(t, n, expiresIn)
		es = append(es, e)
		ids = append(ids, e.EnvelopeID)
	}
	return es, ids
}

// ---- the load ----

// grabEvent is one grab request and its answer.
type grabEvent struct {
	Env    int64
	User   string
	Retry  bool // the user asked before without a definitive answer
	Status int  // HTTP status; 0 when the request failed (transport error, timeout)
	Code   string
	Packet int64
	Amount int64
	Order  string // order_no
	Repeat bool
	Sent   time.Time
	Got    time.Time
}

// definitive reports whether the answer tells the grab's outcome: granted
// (200) or refused (4xx). A 5xx or a failed request may or may not have been
// granted in Redis; the user asks again to find out.
func (e grabEvent) definitive() bool { return e.Status >= 200 && e.Status < 500 }

func (e grabEvent) key() string {
	switch {
	case e.Status == 0:
		return "transport"
	case e.Status == 200 && e.Repeat:
		return "200 repeat"
	case e.Status == 200:
		return "200"
	}
	return fmt.Sprintf("%d %s", e.Status, e.Code)
}

type envUser struct {
	env  int64
	user string
}

// loadLog is every answer of a load, and what they add up to.
type loadLog struct {
	mu       sync.Mutex
	events   []grabEvent
	granted  map[envUser]grabEvent // first 200 of each user of each envelope
	owner    map[int64]envUser     // packet -> the user it was answered to
	unknown  map[envUser]bool      // asked, never answered definitively
	problems []string              // answers that contradict each other
}

func newLoadLog() *loadLog {
	return &loadLog{granted: map[envUser]grabEvent{}, owner: map[int64]envUser{}, unknown: map[envUser]bool{}}
}

func (l *loadLog) record(e grabEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	k := envUser{e.Env, e.User}
	switch {
	case e.Status == 200:
		delete(l.unknown, k)
		if g, ok := l.granted[k]; ok {
			if g.Packet != e.Packet || g.Amount != e.Amount || g.Order != e.Order {
				l.problems = append(l.problems, fmt.Sprintf("user %s of envelope %d was answered packet %d (%d cents, order %s), later packet %d (%d cents, order %s)",
					e.User, e.Env, g.Packet, g.Amount, g.Order, e.Packet, e.Amount, e.Order))
			}
		} else {
			l.granted[k] = e
		}
		if o, ok := l.owner[e.Packet]; ok && o != k {
			l.problems = append(l.problems, fmt.Sprintf("packet %d was answered to user %s (envelope %d) and to user %s (envelope %d)",
				e.Packet, o.user, o.env, e.User, e.Env))
		}
		l.owner[e.Packet] = k
	case e.definitive():
		delete(l.unknown, k)
	default:
		if _, ok := l.granted[k]; !ok {
			l.unknown[k] = true
		}
	}
}

// eventsCopy returns the events recorded so far.
func (l *loadLog) eventsCopy() []grabEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

func (l *loadLog) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := map[string]int{}
	for _, e := range l.events {
		c[e.key()]++
	}
	return c
}

// summary is one line for the test log: answers by kind.
func (l *loadLog) summary() string {
	c := l.counts()
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	l.mu.Lock()
	fmt.Fprintf(&b, "%d requests, %d users granted, %d unknown:", len(l.events), len(l.granted), len(l.unknown))
	l.mu.Unlock()
	for _, k := range keys {
		fmt.Fprintf(&b, " [%s]=%d", k, c[k])
	}
	return b.String()
}

// grants returns each user's first grant of each envelope, in the order
// they were answered.
func (l *loadLog) grants() []grabEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []grabEvent
	for _, e := range l.events {
		if g, ok := l.granted[envUser{e.Env, e.User}]; ok && g == e {
			out = append(out, e)
		}
	}
	return out
}

func (l *loadLog) unknownUsers() []envUser {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []envUser
	for k := range l.unknown {
		out = append(out, k)
	}
	return out
}

// checkConsistent fails the test if two answers contradict each other.
func (l *loadLog) checkConsistent(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, p := range l.problems {
		if i == 20 {
			t.Errorf("... and %d more contradicting answers", len(l.problems)-20)
			break
		}
		t.Errorf("contradicting answers: %s", p)
	}
}

// grabClient is the load's HTTP client: a short timeout, kept-alive
// connections.
func grabClient() *http.Client {
	return &http.Client{
		Timeout:   3 * time.Second,
		Transport: &http.Transport{MaxIdleConns: 128, MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second},
	}
}

// grabOnce asks for a packet of env for user.
func grabOnce(c *http.Client, base string, env int64, user string) grabEvent {
	e := grabEvent{Env: env, User: user, Sent: time.Now()}
	resp, err := c.Post(fmt.Sprintf("%s/v1/envelopes/%d/grab", base, env), "application/json",
		strings.NewReader(`{"user_id":"`+user+`"}`))
	if err != nil {
		e.Got = time.Now()
		return e
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	e.Got = time.Now()
	if err != nil {
		return e // the answer was lost on the way
	}
	e.Status = resp.StatusCode
	if e.Status == 200 {
		var g struct {
			EnvelopeID  int64  `json:"envelope_id"`
			PacketID    int64  `json:"packet_id"`
			AmountCents int64  `json:"amount_cents"`
			OrderNo     string `json:"order_no"`
			Repeat      bool   `json:"repeat"`
		}
		if err := json.Unmarshal(data, &g); err != nil || g.EnvelopeID != env || g.PacketID <= 0 || g.AmountCents <= 0 {
			e.Status, e.Code = 599, fmt.Sprintf("bad 200 body %q", data)
			return e
		}
		e.Packet, e.Amount, e.Order, e.Repeat = g.PacketID, g.AmountCents, g.OrderNo, g.Repeat
		return e
	}
	var eb struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &eb) == nil {
		e.Code = eb.Error.Code
	}
	return e
}

// loadSpec shapes a load.
type loadSpec struct {
	Workers int           // goroutines
	For     time.Duration // how long the load runs at most
	Max     int           // most requests in all
	Pace    time.Duration // pause after each request of a worker
	Tag     string        // user ids are <Tag>-w<worker>-<n>; unique per load
}

// loadRun is a load in progress.
type loadRun struct {
	log    *loadLog
	client *http.Client
	stop   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	sent   atomic.Int64
}

// startLoad grabs envelopes (each new user one envelope, chosen at random)
// with spec.Workers goroutines until spec.For passes, spec.Max requests are
// sent or the test ends. A user whose grab had no definitive answer asks
// again later (bounded), as a client that must learn the outcome would.
func startLoad(t *testing.T, base string, envelopes []int64, spec loadSpec) *loadRun {
	r := &loadRun{log: newLoadLog(), stop: make(chan struct{}), client: grabClient()}
	t.Cleanup(func() { r.halt() })
	deadline := time.Now().Add(spec.For)
	client := r.client
	for w := range spec.Workers {
		r.wg.Go(func() {
			type retry struct {
				env      int64
				user     string
				attempts int
			}
			var retries []retry
			for i := 0; ; i++ {
				select {
				case <-r.stop:
					return
				default:
				}
				if time.Now().After(deadline) || r.sent.Add(1) > int64(spec.Max) {
					return
				}
				var env int64
				var user string
				attempts := 0
				isRetry := len(retries) > 0 && i%2 == 0
				if isRetry {
					env, user, attempts = retries[0].env, retries[0].user, retries[0].attempts
					retries = retries[1:]
				} else {
					env = envelopes[rand.IntN(len(envelopes))]
					user = fmt.Sprintf("%s-w%d-%d", spec.Tag, w, i)
				}
				e := grabOnce(client, base, env, user)
				e.Retry = isRetry
				r.log.record(e)
				if !e.definitive() && attempts < 30 {
					retries = append(retries, retry{env, user, attempts + 1})
				}
				if spec.Pace > 0 {
					select {
					case <-r.stop:
						return
					case <-time.After(spec.Pace):
					}
				}
			}
		})
	}
	return r
}

// wait waits for the load to end by itself and returns its log.
func (r *loadRun) wait() *loadLog {
	r.wg.Wait()
	r.client.CloseIdleConnections()
	return r.log
}

// halt stops the load now (the test's end) and returns its log.
func (r *loadRun) halt() *loadLog {
	r.once.Do(func() { close(r.stop) })
	return r.wait()
}

// resolve asks again for every user whose grab had no definitive answer,
// until each has one or d passes: a granted grab answers as a repeat.
func (l *loadLog) resolve(base string, d time.Duration) {
	client := grabClient()
	deadline := time.Now().Add(d)
	for round := 0; round < 200 && time.Now().Before(deadline); round++ {
		pending := l.unknownUsers()
		if len(pending) == 0 {
			return
		}
		for _, k := range pending {
			e := grabOnce(client, base, k.env, k.user)
			e.Retry = true
			l.record(e)
		}
		time.Sleep(50 * time.Millisecond) // pace the rounds while a server is still away
	}
}

// ---- the ledger ----

// ledgerSpec says what PostgreSQL must hold.
type ledgerSpec struct {
	Envelopes []int64
	Logs      []*loadLog
	// MayBeLost tells an answered grab that Redis may have lost before the
	// flusher wrote it (nil: none may be missing).
	MayBeLost func(grabEvent) bool
	Wait      time.Duration // how long to wait for the answered grabs (default 20 s)
}

type claimRow struct {
	packet int64
	amount int64
}

// assertLedger waits until PostgreSQL holds every answered grab (user, packet
// and amount), then checks that no packet of the envelopes is claimed by a
// user who was not answered that packet (users whose outcome stayed unknown
// may hold one), that each envelope's claimed_cents is the sum of those
// claims, and that `flusher audit -all` passes.
func assertLedger(t *testing.T, s *faultStack, spec ledgerSpec) {
	t.Helper()
	if spec.Wait == 0 {
		spec.Wait = 20 * time.Second
	}
	want, unknown := ledgerAnswers(t, spec.Logs)

	ctx, cancel := context.WithTimeout(context.Background(), spec.Wait+30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.db)
	if err != nil {
		t.Fatalf("ledger: connect: %v", err)
	}
	defer conn.Close(context.Background())

	began := time.Now()
	have, cents := waitLedger(ctx, t, conn, spec, want, began)
	sum, answered, unknownHeld := checkLedgerClaims(t, have, want, unknown)
	lost := logLedgerLost(t, want, have)
	for _, id := range spec.Envelopes {
		if cents[id] != sum[id] {
			t.Errorf("ledger: envelope %d: claimed_cents %d, its claimed packets sum to %d", id, cents[id], sum[id])
		}
		if unknownHeld == 0 && spec.MayBeLost == nil && cents[id] != answered[id] {
			t.Errorf("ledger: envelope %d: claimed_cents %d, the grabs answered sum to %d", id, cents[id], answered[id])
		}
	}
	t.Logf("ledger: %d answered grabs in postgres after %s (%d answered but lost with Redis, %d claims of unknown outcome)",
		len(want)-lost, time.Since(began).Round(time.Millisecond), lost, unknownHeld)
	s.audit(t)
}

// ledgerAnswers gathers the grants of the logs, each checked consistent, and
// the users whose outcome stayed unknown; it fails the test if one order
// number was answered to two grants.
func ledgerAnswers(t *testing.T, logs []*loadLog) (want map[envUser]grabEvent, unknown map[envUser]bool) {
	t.Helper()
	want, unknown = map[envUser]grabEvent{}, map[envUser]bool{}
	orders := map[string]grabEvent{}
	dupOrders := 0
	for _, l := range logs {
		l.checkConsistent(t)
		l.mu.Lock()
		for k, g := range l.granted {
			want[k] = g
			if o, ok := orders[g.Order]; ok {
				if dupOrders++; dupOrders <= 10 {
					t.Errorf("order number %s was answered to user %s (envelope %d, packet %d, at %s) and to user %s (envelope %d, packet %d, at %s)",
						g.Order, o.User, o.Env, o.Packet, o.Got.Format("15:04:05.000"), g.User, g.Env, g.Packet, g.Got.Format("15:04:05.000"))
				}
			}
			orders[g.Order] = g
		}
		for k := range l.unknown {
			unknown[k] = true
		}
		l.mu.Unlock()
	}
	if dupOrders > 0 {
		t.Errorf("%d order numbers were answered to two grants", dupOrders)
	}
	return want, unknown
}

// waitLedger waits up to spec.Wait from began for PostgreSQL to hold every
// grant of want (but those spec.MayBeLost), failing the test with what is
// missing (the first 30) if it does not by then. It returns the claims and
// each envelope's claimed_cents it last read.
func waitLedger(ctx context.Context, t *testing.T, conn *pgx.Conn, spec ledgerSpec, want map[envUser]grabEvent, began time.Time) (map[envUser]claimRow, map[int64]int64) {
	t.Helper()
	deadline := began.Add(spec.Wait)
	lastNote := began
	for {
		have, cents, err := readLedger(ctx, conn, spec.Envelopes)
		if err != nil {
			t.Fatalf("ledger: read postgres: %v", err)
		}
		m := missingFromLedger(want, have, spec.MayBeLost)
		if len(m) == 0 {
			return have, cents
		}
		if time.Since(lastNote) > 2*time.Second {
			lastNote = time.Now()
			t.Logf("ledger: after %s, %d answered grabs not yet in postgres", time.Since(began).Round(time.Millisecond), len(m))
		}
		if time.Now().After(deadline) {
			for i, s := range m {
				if i == 30 {
					t.Errorf("... %d answered grabs missing or wrong in all", len(m))
					break
				}
				t.Errorf("after %s: %s", spec.Wait, s)
			}
			t.FailNow()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readLedger reads the claimed packets of the envelopes, by user, and each
// envelope's claimed_cents.
func readLedger(ctx context.Context, conn *pgx.Conn, envelopes []int64) (map[envUser]claimRow, map[int64]int64, error) {
	rows, err := conn.Query(ctx, `SELECT id, envelope_id, claimed_by, amount_cents FROM packets
			WHERE envelope_id = ANY($1) AND claimed_by IS NOT NULL`, envelopes)
	if err != nil {
		return nil, nil, err
	}
	have := map[envUser]claimRow{}
	var id, env, amount int64
	var user string
	if _, err := pgx.ForEachRow(rows, []any{&id, &env, &user, &amount}, func() error {
		have[envUser{env, user}] = claimRow{id, amount}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	rows, err = conn.Query(ctx, `SELECT id, claimed_cents FROM envelopes WHERE id = ANY($1)`, envelopes)
	if err != nil {
		return nil, nil, err
	}
	cents := map[int64]int64{}
	if _, err := pgx.ForEachRow(rows, []any{&id, &amount}, func() error {
		cents[id] = amount
		return nil
	}); err != nil {
		return nil, nil, err
	}
	return have, cents, nil
}

// missingFromLedger tells, sorted, each grant of want that PostgreSQL holds
// as another packet, or does not hold and mayBeLost (nil: none) does not
// excuse.
func missingFromLedger(want map[envUser]grabEvent, have map[envUser]claimRow, mayBeLost func(grabEvent) bool) []string {
	var out []string
	for k, g := range want {
		c, ok := have[k]
		switch {
		case ok && c == (claimRow{g.Packet, g.Amount}):
		case ok:
			out = append(out, fmt.Sprintf("envelope %d user %s answered packet %d (%d cents), postgres holds packet %d (%d cents)",
				k.env, k.user, g.Packet, g.Amount, c.packet, c.amount))
		case mayBeLost == nil || !mayBeLost(g):
			out = append(out, fmt.Sprintf("envelope %d user %s answered packet %d (%d cents) at %s, not claimed in postgres",
				k.env, k.user, g.Packet, g.Amount, g.Got.Format("15:04:05.000")))
		}
	}
	sort.Strings(out)
	return out
}

// checkLedgerClaims fails the test for each claim in PostgreSQL of a user
// who was neither answered that packet nor left without a definitive answer.
// It returns the claimed cents of each envelope, those of the claims as
// answered, and how many claims are of users of unknown outcome.
func checkLedgerClaims(t *testing.T, have map[envUser]claimRow, want map[envUser]grabEvent, unknown map[envUser]bool) (sum, answered map[int64]int64, unknownHeld int) {
	t.Helper()
	sum, answered = map[int64]int64{}, map[int64]int64{}
	for k, c := range have {
		sum[k.env] += c.amount
		if g, ok := want[k]; ok && c == (claimRow{g.Packet, g.Amount}) {
			answered[k.env] += c.amount
			continue
		}
		if unknown[k] {
			unknownHeld++
			t.Logf("ledger: envelope %d: user %s, whose grab had no definitive answer, holds packet %d", k.env, k.user, c.packet)
			continue
		}
		t.Errorf("ledger: envelope %d: packet %d (%d cents) is claimed by user %s, who was never answered it",
			k.env, c.packet, c.amount, k.user)
	}
	return sum, answered, unknownHeld
}

// logLedgerLost logs how many grants of want PostgreSQL does not hold, and
// when they were answered; it returns how many.
func logLedgerLost(t *testing.T, want map[envUser]grabEvent, have map[envUser]claimRow) (lost int) {
	t.Helper()
	var firstLost, lastLost time.Time
	for k, g := range want {
		if _, ok := have[k]; !ok {
			lost++
			if firstLost.IsZero() || g.Got.Before(firstLost) {
				firstLost = g.Got
			}
			if g.Got.After(lastLost) {
				lastLost = g.Got
			}
		}
	}
	if lost > 0 {
		t.Logf("ledger: %d answered grabs not in postgres, answered between %s and %s",
			lost, firstLost.Format("15:04:05.000"), lastLost.Format("15:04:05.000"))
	}
	return lost
}

// ---- PostgreSQL look-ups ----

func connectTestDB(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect %s: %v", dbURL, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

type envelopeState struct {
	Status         string
	TotalCents     int64
	Count          int
	ClaimedCents   int64
	RefundedCents  int64
	Settled        bool // settled_at is set
	SuspendReason  string
	ClaimedCount   int
	RefundedCount  int
	UnclaimedCount int // neither claimed nor refunded
}

func readEnvelopeState(t *testing.T, c *pgx.Conn, id int64) envelopeState {
	t.Helper()
	var r envelopeState
	var reason *string
	err := c.QueryRow(context.Background(), `
		SELECT e.status, e.total_cents, e.count, e.claimed_cents, e.refunded_cents, e.settled_at IS NOT NULL, e.suspend_reason,
		       count(*) FILTER (WHERE p.claimed_by IS NOT NULL),
		       count(*) FILTER (WHERE p.refunded_at IS NOT NULL),
		       count(*) FILTER (WHERE p.claimed_by IS NULL AND p.refunded_at IS NULL)
		FROM envelopes e JOIN packets p ON p.envelope_id = e.id
		WHERE e.id = $1
		GROUP BY e.id`, id).Scan(&r.Status, &r.TotalCents, &r.Count, &r.ClaimedCents, &r.RefundedCents, &r.Settled, &reason,
		&r.ClaimedCount, &r.RefundedCount, &r.UnclaimedCount)
	if err != nil {
		t.Fatalf("read envelope %d: %v", id, err)
	}
	if reason != nil {
		r.SuspendReason = *reason
	}
	return r
}

// waitEnvelopesStatus polls until every envelope has the status, or fails after d.
func waitEnvelopesStatus(t *testing.T, c *pgx.Conn, ids []int64, status string, d time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	for {
		var behind []string
		for _, id := range ids {
			if r := readEnvelopeState(t, c, id); r.Status != status {
				behind = append(behind, fmt.Sprintf("%d is %s", id, r.Status))
			}
		}
		if len(behind) == 0 {
			return time.Since(began)
		}
		if time.Since(began) > d {
			t.Fatalf("after %s not every envelope is %s: %s", d, status, strings.Join(behind, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// assertNoConflicts fails the test if claim_conflicts has rows.
func assertNoConflicts(t *testing.T, c *pgx.Conn) {
	t.Helper()
	rows, err := c.Query(context.Background(), `SELECT envelope_id, packet_id, user_id, reason FROM claim_conflicts ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var env, packet int64
	var user, reason string
	if _, err := pgx.ForEachRow(rows, []any{&env, &packet, &user, &reason}, func() error {
		t.Errorf("claim_conflicts: envelope %d packet %d user %s: %s", env, packet, user, reason)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// envelopeStatusCounts counts the envelopes of ids by status.
func envelopeStatusCounts(t *testing.T, c *pgx.Conn, ids []int64) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, id := range ids {
		out[readEnvelopeState(t, c, id).Status]++
	}
	return out
}
