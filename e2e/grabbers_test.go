package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/testenv"
)

// Grabbers are stateless: any number of them can serve one deployment. Two
// grabber processes and one flusher share a database and a Redis key prefix;
// both grabbers create envelopes while users grab through both of them, the
// same user of the same envelope often at both at once. Every identifier
// either one hands out is unique across the two (envelope ids, packet ids,
// share codes, order numbers, short user ids), a user never gets two packets
// of one envelope, every 200 reaches PostgreSQL exactly as answered, and the
// audit is clean.
func TestTwoGrabbers(t *testing.T) {
	t.Parallel()
	dbURL := testenv.PostgresURL(t)
	_, prefix := testenv.Redis(t)
	s := startStack(t, dbURL, testenv.RedisURL(t), prefix) // the flusher and grabber 0
	addr := freeAddr(t)
	second := start(t, "grabber", append(s.env, "GRABBER_ADDR="+addr))
	bases := []string{s.base, "http://" + addr}
	waitReady(t, bases[1]+"/readyz")
	client := grabClient()

	type created struct {
		EnvelopeID int64  `json:"envelope_id"`
		ShareCode  string `json:"share_code"`
		Count      int    `json:"count"`
		Status     string `json:"status"`
		by         int    // the grabber that created it
	}
	var (
		mu        sync.Mutex
		envelopes []created
		problems  []string
	)
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	post := func(url, body string, out any) (int, error) {
		resp, err := client.Post(url, "application/json", strings.NewReader(body))
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

	// Creators: two per grabber, 8 envelopes each (32 in all), of 30 to 80
	// packets, one every 100-200 ms while the grabs go on.
	const creatorsPerGrabber, perCreator = 2, 8
	began := time.Now()
	var creators sync.WaitGroup
	for g := range bases {
		for c := range creatorsPerGrabber {
			creators.Go(func() {
				for i := range perCreator {
					n := 30 + rand.IntN(51)
					body := fmt.Sprintf(`{"sender_id":"sender-%d-%d","total_cents":%d,"count":%d,"expires_in_seconds":3600}`, g, c, 100*n, n)
					var e created
					code, err := post(bases[g]+"/v1/envelopes", body, &e)
					if err != nil || code != 201 || e.Status != "open" || e.Count != n {
						problem("grabber %d create %d of creator %d: %d %+v %v", g, i, c, code, e, err)
						continue
					}
					e.by = g
					mu.Lock()
					envelopes = append(envelopes, e)
					mu.Unlock()
					time.Sleep(time.Duration(100+rand.IntN(100)) * time.Millisecond) // spread over the grabbing
				}
			})
		}
	}
	creating := make(chan struct{})
	go func() { creators.Wait(); close(creating) }()

	// Grabbers: 6 workers; users from a pool of 150 grab envelopes created
	// so far, each grab sent to both grabbers at once half of the time, to
	// one of them otherwise; until the creators are done and 1.5 s more.
	type answer struct {
		via            int
		status         int
		env            int64
		user           string
		packet, amount int64
		order          string
		repeat         bool
	}
	var answers []answer
	record := func(a answer) {
		mu.Lock()
		answers = append(answers, a)
		mu.Unlock()
	}
	grab := func(via int, env int64, user string) {
		var g struct {
			EnvelopeID  int64  `json:"envelope_id"`
			PacketID    int64  `json:"packet_id"`
			AmountCents int64  `json:"amount_cents"`
			OrderNo     string `json:"order_no"`
			Repeat      bool   `json:"repeat"`
		}
		code, err := post(fmt.Sprintf("%s/v1/envelopes/%d/grab", bases[via], env), `{"user_id":"`+user+`"}`, &g)
		if err != nil {
			problem("grab %d for %s via grabber %d: %v", env, user, via, err)
			return
		}
		if code == 200 && (g.EnvelopeID != env || g.PacketID <= 0 || g.AmountCents <= 0 || g.OrderNo == "") {
			problem("grab %d for %s via grabber %d: bad answer %+v", env, user, via, g)
			return
		}
		record(answer{via: via, status: code, env: env, user: user, packet: g.PacketID, amount: g.AmountCents, order: g.OrderNo, repeat: g.Repeat})
	}
	var grabbers sync.WaitGroup
	stop := make(chan struct{})
	for w := range 6 {
		grabbers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				n := len(envelopes)
				var env int64
				if n > 0 {
					env = envelopes[rand.IntN(n)].EnvelopeID
				}
				mu.Unlock()
				if n == 0 {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				user := fmt.Sprintf("user-%d", rand.IntN(150))
				if rand.IntN(2) == 0 {
					var both sync.WaitGroup
					both.Go(func() { grab(0, env, user) })
					both.Go(func() { grab(1, env, user) })
					both.Wait()
				} else {
					grab(w%2, env, user)
				}
			}
		})
	}

	// Short user ids: 40 users ask both grabbers at once.
	shortIDs := make([][2]int64, 40)
	var shorts sync.WaitGroup
	for u := range shortIDs {
		for g := range bases {
			shorts.Go(func() {
				var r struct {
					ShortID int64 `json:"short_id"`
				}
				code, err := post(fmt.Sprintf("%s/v1/users/short-%d/short-id", bases[g], u), "", &r)
				if err != nil || code != 200 || r.ShortID <= 0 {
					problem("short id of short-%d via grabber %d: %d %+v %v", u, g, code, r, err)
				}
				shortIDs[u][g] = r.ShortID
			})
		}
	}
	shorts.Wait()

	select {
	case <-creating:
	case <-time.After(30 * time.Second):
		t.Fatal("creating the envelopes took more than 30 s")
	}
	t.Logf("envelopes created in %s", time.Since(began).Round(time.Millisecond))
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	grabbers.Wait()
	client.CloseIdleConnections()
	for _, p := range problems {
		t.Error(p)
	}

	// Identifiers handed out by the two grabbers.
	created0, ids, codes := 0, map[int64]int{}, map[string]int64{}
	var envIDs []int64
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
	if want := 2 * creatorsPerGrabber * perCreator; len(envelopes) != want || created0 != want/2 {
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

	// The answers: one packet per user and envelope whichever grabber
	// answered, one user per packet, one order number per grant.
	type grant struct {
		packet, amount int64
		order          string
	}
	granted := map[envUser]grant{}
	answeredBy := map[envUser][2]bool{} // which grabbers answered the user 200
	owner := map[int64]envUser{}
	orders := map[string]envUser{}
	byVia := [2]int{}
	statuses := map[string]int{}
	for _, a := range answers {
		statuses[fmt.Sprintf("%d", a.status)]++
		if a.status != 200 {
			if a.status != 409 {
				t.Errorf("grab %d for %s via grabber %d answered %d", a.env, a.user, a.via, a.status)
			}
			continue
		}
		byVia[a.via]++
		k := envUser{a.env, a.user}
		v := answeredBy[k]
		v[a.via] = true
		answeredBy[k] = v
		g := grant{a.packet, a.amount, a.order}
		if prev, ok := granted[k]; ok && prev != g {
			t.Errorf("user %s of envelope %d was answered packet %d (order %s) and packet %d (order %s)", a.user, a.env, prev.packet, prev.order, g.packet, g.order)
		}
		granted[k] = g
		if o, ok := owner[a.packet]; ok && o != k {
			t.Errorf("packet %d answered to %s (envelope %d) and %s (envelope %d)", a.packet, o.user, o.env, a.user, a.env)
		}
		owner[a.packet] = k
		if o, ok := orders[a.order]; ok && o != k {
			t.Errorf("order number %s answered to %s (envelope %d) and %s (envelope %d)", a.order, o.user, o.env, a.user, a.env)
		}
		orders[a.order] = k
	}
	both := 0
	for _, v := range answeredBy {
		if v[0] && v[1] {
			both++
		}
	}
	t.Logf("%d envelopes (%d by grabber 0), %d grab requests by status %v, %d grants (%d users answered 200 by both grabbers); 200s by grabber: %v; %d short ids",
		len(envelopes), created0, len(answers), statuses, len(granted), both, byVia, len(seenShort))
	if byVia[0] == 0 || byVia[1] == 0 || len(granted) < 200 || both == 0 {
		t.Errorf("too little was granted to tell anything: %d grants, 200s by grabber %v, %d users answered by both", len(granted), byVia, both)
	}

	// PostgreSQL: every envelope's packets (ids unique across envelopes,
	// the count created), and exactly the grants answered, each once.
	db := connectTestDB(t, dbURL)
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Second)
	for {
		have := map[envUser]grant{}
		rows, err := db.Query(ctx, `SELECT envelope_id, claimed_by, id, amount_cents, coalesce(order_no, '')
			FROM packets WHERE envelope_id = ANY($1) AND claimed_by IS NOT NULL`, envIDs)
		if err != nil {
			t.Fatal(err)
		}
		var k envUser
		var g grant
		if _, err := pgx.ForEachRow(rows, []any{&k.env, &k.user, &g.packet, &g.amount, &g.order}, func() error {
			have[k] = g
			return nil
		}); err != nil {
			t.Fatal(err)
		}
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
		if len(diff) == 0 {
			break
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
	var packets, distinct, envelopesWithPackets int64
	if err := db.QueryRow(ctx, `SELECT count(*), count(DISTINCT id), count(DISTINCT envelope_id) FROM packets WHERE envelope_id = ANY($1)`, envIDs).
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
	assertNoConflicts(t, db)
	s.audit(t)
	s.grabber.stop(t)
	second.stop(t)
	s.flusher.stop(t)
}
