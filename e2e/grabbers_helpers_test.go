package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// twoGrabberRun is the traffic TestTwoGrabbers sends to its two grabbers:
// what was created and answered, and what went wrong on the way. The
// creators, grabbers and short-id askers share it.
type twoGrabberRun struct {
	bases  []string // grabber 0, grabber 1
	client *http.Client

	mu        sync.Mutex
	envelopes []twoGrabberEnvelope
	answers   []twoGrabberAnswer
	problems  []string
}

type twoGrabberEnvelope struct {
	EnvelopeID int64  `json:"envelope_id"`
	ShareCode  string `json:"share_code"`
	Count      int    `json:"count"`
	Status     string `json:"status"`
	by         int    // the grabber that created it
}

// twoGrabberAnswer is one grab request's answer and the grabber it came from.
type twoGrabberAnswer struct {
	via            int
	status         int
	env            int64
	user           string
	packet, amount int64
	order          string
	repeat         bool
}

// twoGrabberGrant is what a user of an envelope was granted.
type twoGrabberGrant struct {
	packet, amount int64
	order          string
}

func (r *twoGrabberRun) problem(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// post sends body to url and decodes a 2xx answer into out.
func (r *twoGrabberRun) post(url, body string, out any) (int, error) {
	resp, err := r.client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s: %q: %w", url, data, err)
		}
	}
	return resp.StatusCode, nil
}

// create starts perGrabber creators on each grabber, each creating perCreator
// envelopes of 30 to 80 packets one every 100-200 ms; the channel closes when
// they are all done.
func (r *twoGrabberRun) create(perGrabber, perCreator int) <-chan struct{} {
	var creators sync.WaitGroup
	for g := range r.bases {
		for c := range perGrabber {
			creators.Go(func() {
				for i := range perCreator {
					r.createOne(g, c, i)
					time.Sleep(time.Duration(100+rand.IntN(100)) * time.Millisecond) // spread over the grabbing
				}
			})
		}
	}
	done := make(chan struct{})
	go func() { creators.Wait(); close(done) }()
	return done
}

// createOne is creator c's i-th envelope on grabber g.
func (r *twoGrabberRun) createOne(g, c, i int) {
	n := 30 + rand.IntN(51)
	body := fmt.Sprintf(`{"sender_id":"sender-%d-%d","total_cents":%d,"count":%d,"expires_in_seconds":3600}`, g, c, 100*n, n)
	var e twoGrabberEnvelope
	code, err := r.post(r.bases[g]+"/v1/envelopes", body, &e)
	if err != nil || code != 201 || e.Status != "open" || e.Count != n {
		r.problem("grabber %d create %d of creator %d: %d %+v %v", g, i, c, code, e, err)
		return
	}
	e.by = g
	r.mu.Lock()
	r.envelopes = append(r.envelopes, e)
	r.mu.Unlock()
}

// grabUntil starts workers that grab, for users from a pool of 150, envelopes
// created so far until stop closes: half of the time the same grab is sent to
// both grabbers at once, otherwise to one of them.
func (r *twoGrabberRun) grabUntil(workers int, stop <-chan struct{}) *sync.WaitGroup {
	var grabbers sync.WaitGroup
	for w := range workers {
		grabbers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r.grabSome(w)
			}
		})
	}
	return &grabbers
}

// grabSome is one round of worker w: a random user grabs a random envelope,
// or the worker waits a little while there is none yet.
func (r *twoGrabberRun) grabSome(w int) {
	r.mu.Lock()
	n := len(r.envelopes)
	var env int64
	if n > 0 {
		env = r.envelopes[rand.IntN(n)].EnvelopeID
	}
	r.mu.Unlock()
	if n == 0 {
		time.Sleep(5 * time.Millisecond)
		return
	}
	user := fmt.Sprintf("user-%d", rand.IntN(150))
	if rand.IntN(2) == 0 {
		var both sync.WaitGroup
		both.Go(func() { r.grab(0, env, user) })
		both.Go(func() { r.grab(1, env, user) })
		both.Wait()
	} else {
		r.grab(w%2, env, user)
	}
}

// grab asks grabber via for a packet of env for user and records the answer.
func (r *twoGrabberRun) grab(via int, env int64, user string) {
	var g struct {
		EnvelopeID  int64  `json:"envelope_id"`
		PacketID    int64  `json:"packet_id"`
		AmountCents int64  `json:"amount_cents"`
		OrderNo     string `json:"order_no"`
		Repeat      bool   `json:"repeat"`
	}
	code, err := r.post(fmt.Sprintf("%s/v1/envelopes/%d/grab", r.bases[via], env), `{"user_id":"`+user+`"}`, &g)
	if err != nil {
		r.problem("grab %d for %s via grabber %d: %v", env, user, via, err)
		return
	}
	if code == 200 && (g.EnvelopeID != env || g.PacketID <= 0 || g.AmountCents <= 0 || g.OrderNo == "") {
		r.problem("grab %d for %s via grabber %d: bad answer %+v", env, user, via, g)
		return
	}
	r.mu.Lock()
	r.answers = append(r.answers, twoGrabberAnswer{via: via, status: code, env: env, user: user,
		packet: g.PacketID, amount: g.AmountCents, order: g.OrderNo, repeat: g.Repeat})
	r.mu.Unlock()
}

// shortIDs has users short-0 .. short-(users-1) ask both grabbers at once for
// their short id; it returns what each grabber answered.
func (r *twoGrabberRun) shortIDs(users int) [][2]int64 {
	shortIDs := make([][2]int64, users)
	var shorts sync.WaitGroup
	for u := range shortIDs {
		for g := range r.bases {
			shorts.Go(func() {
				var resp struct {
					ShortID int64 `json:"short_id"`
				}
				code, err := r.post(fmt.Sprintf("%s/v1/users/short-%d/short-id", r.bases[g], u), "", &resp)
				if err != nil || code != 200 || resp.ShortID <= 0 {
					r.problem("short id of short-%d via grabber %d: %d %+v %v", u, g, code, resp, err)
				}
				shortIDs[u][g] = resp.ShortID
			})
		}
	}
	shorts.Wait()
	return shortIDs
}

// checkTwoGrabberIDs fails the test unless the envelope ids, share codes and
// short ids the two grabbers handed out are unique, want envelopes were
// created, half by each grabber, and each user got one short id from both.
// It returns how many grabber 0 created, the envelope ids and how many short
// ids there are.
func checkTwoGrabberIDs(t *testing.T, envelopes []twoGrabberEnvelope, shortIDs [][2]int64, want int) (created0 int, envIDs []int64, shorts int) {
	t.Helper()
	ids, codes := map[int64]int{}, map[string]int64{}
	for _, e := range envelopes {
		if e.by == 0 {
			created0++
		}
		if ids[e.EnvelopeID]++; ids[e.EnvelopeID] == 2 {
			t.Errorf("envelope id %d handed out twice", e.EnvelopeID)
		}
		if other, ok := codes[e.ShareCode]; ok {
			t.Errorf("share code %s handed out for envelopes %d and %d", e.ShareCode, other, e.EnvelopeID)
		}
		codes[e.ShareCode] = e.EnvelopeID
		envIDs = append(envIDs, e.EnvelopeID)
	}
	if len(envelopes) != want || created0 != want/2 {
		t.Errorf("%d envelopes created (%d by grabber 0), want %d, half by each", len(envelopes), created0, want)
	}
	seenShort := map[int64]int{}
	for u, p := range shortIDs {
		if p[0] != p[1] {
			t.Errorf("user short-%d got short id %d from grabber 0 and %d from grabber 1", u, p[0], p[1])
		}
		if other, ok := seenShort[p[0]]; ok {
			t.Errorf("short id %d handed out to short-%d and short-%d", p[0], other, u)
		}
		seenShort[p[0]] = u
	}
	return created0, envIDs, len(seenShort)
}

// twoGrabberTally is what the grab answers add up to.
type twoGrabberTally struct {
	granted  map[envUser]twoGrabberGrant
	byVia    [2]int         // 200s by grabber
	statuses map[string]int // answers by status
	both     int            // users answered 200 by both grabbers
}

// tallyTwoGrabberAnswers fails the test unless every answer is a 200 or a
// 409 and the 200s give one packet per user and envelope whichever grabber
// answered, one user per packet and one order number per grant.
func tallyTwoGrabberAnswers(t *testing.T, answers []twoGrabberAnswer) twoGrabberTally {
	t.Helper()
	tally := twoGrabberTally{granted: map[envUser]twoGrabberGrant{}, statuses: map[string]int{}}
	answeredBy := map[envUser][2]bool{} // which grabbers answered the user 200
	owner := map[int64]envUser{}
	orders := map[string]envUser{}
	for _, a := range answers {
		tally.statuses[fmt.Sprintf("%d", a.status)]++
		if a.status != 200 {
			if a.status != 409 {
				t.Errorf("grab %d for %s via grabber %d answered %d", a.env, a.user, a.via, a.status)
			}
			continue
		}
		tally.byVia[a.via]++
		k := envUser{a.env, a.user}
		v := answeredBy[k]
		v[a.via] = true
		answeredBy[k] = v
		g := twoGrabberGrant{a.packet, a.amount, a.order}
		if prev, ok := tally.granted[k]; ok && prev != g {
			t.Errorf("user %s of envelope %d was answered packet %d (order %s) and packet %d (order %s)", a.user, a.env, prev.packet, prev.order, g.packet, g.order)
		}
		tally.granted[k] = g
		if o, ok := owner[a.packet]; ok && o != k {
			t.Errorf("packet %d answered to %s (envelope %d) and %s (envelope %d)", a.packet, o.user, o.env, a.user, a.env)
		}
		owner[a.packet] = k
		if o, ok := orders[a.order]; ok && o != k {
			t.Errorf("order number %s answered to %s (envelope %d) and %s (envelope %d)", a.order, o.user, o.env, a.user, a.env)
		}
		orders[a.order] = k
	}
	for _, v := range answeredBy {
		if v[0] && v[1] {
			tally.both++
		}
	}
	return tally
}

// waitGrantsInPostgres waits up to 15 s for PostgreSQL to hold exactly the
// grants answered in the envelopes envIDs, and fails the test with the
// differences (the first 20) if it does not by then.
func waitGrantsInPostgres(t *testing.T, db *pgx.Conn, envIDs []int64, granted map[envUser]twoGrabberGrant) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		diff := grantDiff(granted, grantsInPostgres(t, db, envIDs))
		if len(diff) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for i, d := range diff {
				if i == 20 {
					t.Errorf("... %d differences in all", len(diff))
					break
				}
				t.Error(d)
			}
			t.FailNow()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// grantsInPostgres is the claimed packets of the envelopes envIDs.
func grantsInPostgres(t *testing.T, db *pgx.Conn, envIDs []int64) map[envUser]twoGrabberGrant {
	t.Helper()
	have := map[envUser]twoGrabberGrant{}
	rows, err := db.Query(context.Background(), `SELECT envelope_id, claimed_by, id, amount_cents, coalesce(order_no, '')
			FROM packets WHERE envelope_id = ANY($1) AND claimed_by IS NOT NULL`, envIDs)
	if err != nil {
		t.Fatal(err)
	}
	var k envUser
	var g twoGrabberGrant
	if _, err := pgx.ForEachRow(rows, []any{&k.env, &k.user, &g.packet, &g.amount, &g.order}, func() error {
		have[k] = g
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return have
}

// grantDiff tells each grant answered that PostgreSQL does not hold as
// answered, and each one it holds that was never answered.
func grantDiff(granted, have map[envUser]twoGrabberGrant) []string {
	var diff []string
	for k, g := range granted {
		if h, ok := have[k]; !ok || h != g {
			diff = append(diff, fmt.Sprintf("envelope %d user %s answered %+v, postgres holds %+v", k.env, k.user, g, h))
		}
	}
	for k, h := range have {
		if _, ok := granted[k]; !ok {
			diff = append(diff, fmt.Sprintf("envelope %d user %s holds %+v in postgres, never answered", k.env, k.user, h))
		}
	}
	return diff
}

// checkPacketsInPostgres fails the test unless PostgreSQL holds every
// envelope's packets, as many as created, with ids unique across envelopes.
func checkPacketsInPostgres(t *testing.T, db *pgx.Conn, envelopes []twoGrabberEnvelope, envIDs []int64) {
	t.Helper()
	var packets, distinct, envelopesWithPackets int64
	if err := db.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT id), count(DISTINCT envelope_id) FROM packets WHERE envelope_id = ANY($1)`, envIDs).
		Scan(&packets, &distinct, &envelopesWithPackets); err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, e := range envelopes {
		want += int64(e.Count)
	}
	if packets != want || distinct != want || envelopesWithPackets != int64(len(envelopes)) {
		t.Errorf("postgres: %d packets (%d distinct ids) in %d envelopes; created %d packets in %d envelopes", packets, distinct, envelopesWithPackets, want, len(envelopes))
	}
}
