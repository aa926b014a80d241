package e2e_test

// The failover scenario (failover_test.go): both daemons on a private Redis
// Cluster, a grab load, one master SIGKILLed mid-load, its replica promoted,
// more load; then what the answers, PostgreSQL, Redis and `flusher audit`
// say about it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
	"redpacket/internal/testenv/throwaway"
)

// failoverSpec shapes one run of the scenario.
type failoverSpec struct {
	WaitReplicas int // GRAB_WAIT_REPLICAS (GRAB_WAIT_TIMEOUT is the default, 100 ms)
	// RestartVictim starts the killed master again once its replica is
	// promoted: it comes back empty, as a replica of the new master (what a
	// process supervisor restarting the crashed node does).
	RestartVictim bool
	// CutReplica, when not 0, cuts the victim's replica off that long before
	// the master is killed: the replica is SIGSTOPped (so it cannot
	// reconnect) and the master drops its replication link (CLIENT KILL TYPE
	// replica); the replica is SIGCONTed right after the kill. The master
	// goes on acknowledging writes that only its memory holds: the window a
	// slow or broken replication link opens. 0 kills the master with its
	// replica in step.
	CutReplica time.Duration
	// PauseFlusher SIGSTOPs the flusher with the replica (CutReplica) and
	// SIGCONTs it once the replica is promoted: a flusher running behind, so
	// that nothing the master acknowledged during the cut reached
	// PostgreSQL.
	PauseFlusher bool
	Tag          string // user ids of the load
}

// failoverResult is what a run saw.
type failoverResult struct {
	stack                      *faultStack
	log                        *loadLog
	ids                        []int64 // the envelopes
	onVictim                   map[int64]bool
	victim, replica, idsMaster string

	cut             time.Time // the replica cut off (CutReplica)
	killed          time.Time
	lastKept        time.Time     // the latest answer of the killed master that PostgreSQL holds
	promotedAfter   time.Duration // kill to promotion seen by every survivor
	reattachedAfter time.Duration // kill to the restarted victim replicating the new master (RestartVictim)
	readyAfter      time.Duration // kill to promotion, or to reattachment with RestartVictim
	resumedAfter    time.Duration // kill to the first 200 of a grab of the victim's shards sent after readyAfter (-1 never)
	drainedAfter    time.Duration // load end to every shard's queue empty
	undrained       string        // claims left in Redis when the wait for them ended

	// Answers compared with PostgreSQL.
	answered  int                   // users answered 200 (first answer of each user of each envelope)
	inPG      int                   // of them, PostgreSQL holds the packet answered
	lost      []grabEvent           // answered 200; PostgreSQL holds no packet of the envelope for the user
	differ    []grabEvent           // answered 200; PostgreSQL holds another packet for the user
	twice     map[int64][]grabEvent // packets answered 200 to more than one user
	unknownPG int                   // claims in PostgreSQL of users who never had a definitive answer
	strangers []string              // claims in PostgreSQL of users never answered that packet nor left unknown

	conflicts []string         // claim_conflicts rows
	status    map[int64]string // envelope statuses after the run
	reasons   map[int64]string // suspend reasons
	audit     auditOutcome
}

// auditOutcome is `flusher audit -all -json`.
type auditOutcome struct {
	Code       int
	OK         bool    `json:"ok"`
	Suspended  []int64 `json:"suspended"`
	Conflicts  int     `json:"conflicts"`
	Violations []struct {
		EnvelopeID int64  `json:"envelope_id"`
		Check      string `json:"check"`
		Detail     string `json:"detail"`
	} `json:"violations"`
}

// clean: no violation, and exit 0, or 3 exactly when envelopes are
// suspended (they wait for an operator; that is not a violation).
func (a auditOutcome) clean() bool {
	want := 0
	if len(a.Suspended) > 0 {
		want = 3
	}
	return len(a.Violations) == 0 && a.Code == want
}

// visible tells whether an operator is told about the envelope: it is
// suspended, or the audit reports a violation of it.
func (r *failoverResult) visible(env int64) bool {
	if r.status[env] == "suspended" {
		return true
	}
	for _, v := range r.audit.Violations {
		if v.EnvelopeID == env {
			return true
		}
	}
	return false
}

// runFailover runs the scenario. It fails the test only when the run itself
// cannot go on (a daemon or the cluster misbehaving before the checks); the
// caller judges the outcome.
func runFailover(t *testing.T, spec failoverSpec) *failoverResult {
	t.Helper()
	pc := testenv.PrivateCluster(t, throwaway.ClusterOptions{NodeTimeout: time.Second})
	const prefix = "rp" // the cluster is the test's own
	s := startFailoverStack(t, pc, prefix, spec)

	// Six envelopes on six consecutive shards, spread over the masters.
	_, ids := s.createEnvelopes(t, 3600, 3000, 3000, 3000, 3000, 3000, 3000)
	r := &failoverResult{stack: s, ids: ids, onVictim: map[int64]bool{}, resumedAfter: -1}

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// The test's own client reads the slot map again every half second, so
	// that it follows the failover whatever the daemons do.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: pc.Addrs, ClusterStateReloadInterval: 500 * time.Millisecond})
	defer func() { _ = rdb.Close() }()
	keys := redisstore.NewKeys(prefix, 16)
	r.pickVictim(ctx, t, pc, rdb, keys)

	load := startLoad(t, s.base, ids, loadSpec{Workers: 6, For: 40 * time.Second, Max: 1 << 30, Pace: 3 * time.Millisecond, Tag: spec.Tag})
	time.Sleep(time.Second) // load before the fault
	promoted := r.killVictim(ctx, t, pc, spec, load)
	rdb.ReloadState(ctx) // once the victim's replica is promoted
	ready := promoted    // from when the victim's shards can serve grabs again
	if spec.RestartVictim {
		ready = r.restartVictim(ctx, t, pc, load)
	}

	// Load on until grabs of the victim's shards are answered 200 again for
	// a second, every one of its envelopes is suspended (their grabs answer
	// 503 until an operator acts), or 5 s after they could be answered.
	db := connectTestDB(t, s.db)
	r.loadUntilResumed(t, db, load, ready)
	r.readyAfter = ready.Sub(r.killed)
	r.log = load.halt()
	loadEnd := time.Now()
	// Users without a definitive answer ask again; every claim Redis still
	// holds must reach PostgreSQL. Shorter when the grabs never came back:
	// the daemons are not going to catch up.
	settle := 10 * time.Second
	if r.resumedAfter < 0 {
		settle = 2 * time.Second
	}
	r.resolve(t, db, settle)
	if err := waitQueuesEmpty(ctx, rdb, keys, settle); err != nil {
		r.undrained = err.Error()
	}
	r.drainedAfter = time.Since(loadEnd)

	r.compare(t, db)
	r.audit = runAuditJSON(t, s.env)
	return r
}

// startFailoverStack starts the flusher and the grabber on the private
// cluster pc, each ready.
func startFailoverStack(t *testing.T, pc *throwaway.Cluster, prefix string, spec failoverSpec) *faultStack {
	t.Helper()
	dbURL := testenv.PostgresURL(t)
	grabberAddr, flusherAddr := freeAddr(t), freeAddr(t)
	env := append(faultEnv(dbURL, "redis://127.0.0.1:1/0", prefix, grabberAddr, flusherAddr),
		"REDIS_CLUSTER_ADDRS="+strings.Join(pc.Addrs, ","),
		"GRAB_WAIT_REPLICAS="+strconv.Itoa(spec.WaitReplicas))
	s := &faultStack{db: dbURL, env: env, base: "http://" + grabberAddr, flusherURL: "http://" + flusherAddr}
	s.flusher = start(t, "flusher", env)
	waitReady(t, s.flusherURL+"/readyz")
	s.grabber = start(t, "grabber", env)
	waitReady(t, s.base+"/readyz")
	return s
}

// pickVictim chooses the master to kill: the one serving the most of the
// envelopes' shards, other than the one holding the identifier counters
// ({rp:ids}), so the run is about grabs; and finds its replica.
func (r *failoverResult) pickVictim(ctx context.Context, t *testing.T, pc *throwaway.Cluster, rdb *redis.ClusterClient, keys redisstore.Keys) {
	t.Helper()
	masterOf := func(key string) string {
		n, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			t.Fatalf("master of %s: %v", key, err)
		}
		return n.Options().Addr
	}
	r.idsMaster = masterOf(keys.SharePool())
	perMaster := map[string][]int64{}
	for _, id := range r.ids {
		m := masterOf(keys.Meta(id))
		perMaster[m] = append(perMaster[m], id)
	}
	for m, es := range perMaster {
		if m != r.idsMaster && (r.victim == "" || len(es) > len(perMaster[r.victim]) ||
			(len(es) == len(perMaster[r.victim]) && m < r.victim)) {
			r.victim = m
		}
	}
	if r.victim == "" {
		t.Fatalf("every envelope is on the master of the identifiers (%s): %v", r.idsMaster, perMaster)
	}
	for _, id := range perMaster[r.victim] {
		r.onVictim[id] = true
	}
	replica, err := pc.ReplicaOf(ctx, r.victim)
	if err != nil {
		t.Fatal(err)
	}
	r.replica = replica
	t.Logf("victim master %s (replica %s) serves envelopes %v; identifiers on %s; envelopes per master %v",
		r.victim, replica, perMaster[r.victim], r.idsMaster, perMaster)
}

// killVictim cuts the victim's replica off first if the spec says so, kills
// the victim and waits for its replica's promotion, which it returns the time
// of.
func (r *failoverResult) killVictim(ctx context.Context, t *testing.T, pc *throwaway.Cluster, spec failoverSpec, load *loadRun) time.Time {
	t.Helper()
	s, replica := r.stack, r.replica
	if spec.CutReplica > 0 {
		r.cutReplica(ctx, t, pc, spec)
	}
	if err := pc.Kill(r.victim); err != nil {
		t.Fatal(err)
	}
	r.killed = time.Now()
	if spec.CutReplica > 0 {
		if err := pc.Resume(replica); err != nil {
			t.Fatal(err)
		}
	}
	if err := pc.WaitPromoted(ctx, r.victim, replica, 20*time.Second); err != nil {
		load.halt()
		t.Fatalf("after the kill of %s: %v", r.victim, err)
	}
	promoted := time.Now()
	r.promotedAfter = promoted.Sub(r.killed)
	if spec.PauseFlusher {
		if err := s.flusher.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	return promoted
}

// restartVictim starts the killed master again and waits for it to replicate
// its promoted replica; it returns when it does.
func (r *failoverResult) restartVictim(ctx context.Context, t *testing.T, pc *throwaway.Cluster, load *loadRun) time.Time {
	t.Helper()
	replica := r.replica
	if err := pc.Restart(ctx, r.victim); err != nil {
		load.halt()
		t.Fatal(err)
	}
	if err := pc.WaitReplicaOf(ctx, r.victim, replica, 20*time.Second); err != nil {
		load.halt()
		t.Fatalf("restarted %s: %v", r.victim, err)
	}
	ready := time.Now()
	r.reattachedAfter = ready.Sub(r.killed)
	return ready
}

// cutReplica stops the victim's replica reading and has the master drop its
// link, for spec.CutReplica: what the master does from then on reaches only
// its own memory. With PauseFlusher the flusher is stopped first.
func (r *failoverResult) cutReplica(ctx context.Context, t *testing.T, pc *throwaway.Cluster, spec failoverSpec) {
	t.Helper()
	s := r.stack
	if spec.PauseFlusher {
		if err := s.flusher.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.flusher.cmd.Process.Signal(syscall.SIGCONT) })
	}
	if err := pc.Pause(r.replica); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Resume(r.replica) }) // harmless if running
	if err := pc.CutReplicaLinks(ctx, r.victim); err != nil {
		t.Fatal(err)
	}
	r.cut = time.Now()
	time.Sleep(spec.CutReplica)
}

// loadUntilResumed lets the load run until a grab of the victim's shards
// sent after ready is answered 200, and a second more; or until every one of
// the victim's envelopes is suspended; or 5 s after ready.
func (r *failoverResult) loadUntilResumed(t *testing.T, db *pgx.Conn, load *loadRun, ready time.Time) {
	t.Helper()
	deadline := ready.Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if r.resumedAfter < 0 {
			for _, e := range load.log.eventsCopy() {
				if e.Status == 200 && r.onVictim[e.Env] && e.Sent.After(ready) {
					r.resumedAfter = e.Got.Sub(r.killed)
					deadline = e.Got.Add(time.Second)
					break
				}
			}
			suspended := 0
			for id := range r.onVictim {
				if readEnvelopeState(t, db, id).Status == "suspended" {
					suspended++
				}
			}
			if suspended == len(r.onVictim) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// resolve asks again for every user whose grab had no definitive answer,
// until each has one or d passes, as loadLog.resolve does, leaving out the
// users of suspended envelopes: those answer 503 until an operator acts.
func (r *failoverResult) resolve(t *testing.T, db *pgx.Conn, d time.Duration) {
	t.Helper()
	client := grabClient()
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		suspended := map[int64]bool{}
		for _, id := range r.ids {
			suspended[id] = readEnvelopeState(t, db, id).Status == "suspended"
		}
		var pending []envUser
		for _, k := range r.log.unknownUsers() {
			if !suspended[k.env] {
				pending = append(pending, k)
			}
		}
		if len(pending) == 0 {
			return
		}
		for _, k := range pending {
			e := grabOnce(client, r.stack.base, k.env, k.user)
			e.Retry = true
			r.log.record(e)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitQueuesEmpty waits until no shard has claims queued or in flight.
func waitQueuesEmpty(ctx context.Context, rdb *redis.ClusterClient, keys redisstore.Keys, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		var left []string
		for sh := range keys.Shards() {
			for _, k := range []string{keys.Consumed(sh), keys.Inflight(sh)} {
				n, err := rdb.LLen(ctx, k).Result()
				if err != nil {
					left = append(left, fmt.Sprintf("%s: %v", k, err))
				} else if n > 0 {
					left = append(left, fmt.Sprintf("%s: %d", k, n))
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("claims still in redis %s after the load: %s", d, strings.Join(left, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// compare reads the envelopes' claims, statuses and conflicts from
// PostgreSQL and sets them against the answers.
func (r *failoverResult) compare(t *testing.T, db *pgx.Conn) {
	t.Helper()
	have := r.claimsInPG(t, db)
	l := r.log
	l.mu.Lock()
	r.answered = len(l.granted)
	r.matchGrants(have)
	r.matchClaims(have)
	owners := packetOwners(l.events)
	l.mu.Unlock()
	r.twice = map[int64][]grabEvent{}
	for p, us := range owners {
		if len(us) > 1 {
			for _, e := range us {
				r.twice[p] = append(r.twice[p], e)
			}
			sort.Slice(r.twice[p], func(i, j int) bool { return r.twice[p][i].Got.Before(r.twice[p][j].Got) })
		}
	}
	byGot := func(es []grabEvent) { sort.Slice(es, func(i, j int) bool { return es[i].Got.Before(es[j].Got) }) }
	byGot(r.lost)
	byGot(r.differ)

	r.status, r.reasons = map[int64]string{}, map[int64]string{}
	for _, id := range r.ids {
		st := readEnvelopeState(t, db, id)
		r.status[id], r.reasons[id] = st.Status, st.SuspendReason
	}
	r.readConflicts(t, db)
}

// pgClaim is a claimed packet as PostgreSQL holds it.
type pgClaim struct {
	packet, amount int64
	order          string
}

// claimsInPG is the claimed packets of the run's envelopes, by user.
func (r *failoverResult) claimsInPG(t *testing.T, db *pgx.Conn) map[envUser]pgClaim {
	t.Helper()
	have := map[envUser]pgClaim{}
	rows, err := db.Query(t.Context(), `SELECT envelope_id, claimed_by, id, amount_cents, coalesce(order_no, '')
		FROM packets WHERE envelope_id = ANY($1) AND claimed_by IS NOT NULL`, r.ids)
	if err != nil {
		t.Fatal(err)
	}
	var env int64
	var user string
	var c pgClaim
	if _, err := pgx.ForEachRow(rows, []any{&env, &user, &c.packet, &c.amount, &c.order}, func() error {
		have[envUser{env, user}] = c
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return have
}

// matchGrants sorts each user answered 200 into lost, differ or held in
// PostgreSQL, and finds the latest answer of the killed master that
// PostgreSQL kept. The caller holds the log's lock.
func (r *failoverResult) matchGrants(have map[envUser]pgClaim) {
	for k, g := range r.log.granted {
		c, ok := have[k]
		switch {
		case !ok:
			r.lost = append(r.lost, g)
		case c.packet != g.Packet || c.amount != g.Amount:
			r.differ = append(r.differ, g)
		default:
			r.inPG++
			if r.onVictim[k.env] && g.Sent.Before(r.killed) && g.Got.After(r.lastKept) {
				r.lastKept = g.Got
			}
		}
	}
}

// matchClaims counts the claims in PostgreSQL of users never answered
// definitively, and tells those of users never answered at all. The caller
// holds the log's lock.
func (r *failoverResult) matchClaims(have map[envUser]pgClaim) {
	l := r.log
	for k, c := range have {
		if g, ok := l.granted[k]; ok && g.Packet == c.packet {
			continue
		}
		if l.unknown[k] {
			r.unknownPG++
			continue
		}
		if _, ok := l.granted[k]; !ok {
			r.strangers = append(r.strangers, fmt.Sprintf("envelope %d: packet %d claimed by %s, never answered to that user", k.env, c.packet, k.user))
		}
	}
}

// packetOwners is, for each packet answered 200, the first such answer to
// each user.
func packetOwners(events []grabEvent) map[int64]map[string]grabEvent {
	owners := map[int64]map[string]grabEvent{}
	for _, e := range events {
		if e.Status != 200 {
			continue
		}
		if owners[e.Packet] == nil {
			owners[e.Packet] = map[string]grabEvent{}
		}
		if _, ok := owners[e.Packet][e.User]; !ok {
			owners[e.Packet][e.User] = e
		}
	}
	return owners
}

// readConflicts reads the claim_conflicts rows.
func (r *failoverResult) readConflicts(t *testing.T, db *pgx.Conn) {
	t.Helper()
	rows, err := db.Query(t.Context(), `SELECT envelope_id, packet_id, user_id, reason FROM claim_conflicts ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var env, packet int64
	var user, reason string
	if _, err := pgx.ForEachRow(rows, []any{&env, &packet, &user, &reason}, func() error {
		r.conflicts = append(r.conflicts, fmt.Sprintf("envelope %d packet %d user %s: %s", env, packet, user, reason))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// runAuditJSON runs `flusher audit -all -json` (bounded by a minute).
func runAuditJSON(t *testing.T, env []string) auditOutcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binaries(t), "flusher"), "audit", "-all", "-json")
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var a auditOutcome
	if ee, ok := err.(*exec.ExitError); ok {
		a.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("flusher audit: %v", err)
	}
	// 0 clean, 1 violations, 3 suspended envelopes (and no violation).
	if a.Code == 2 || a.Code > 3 || json.Unmarshal(stdout.Bytes(), &a) != nil {
		t.Fatalf("flusher audit -all -json: exit %d\n%s\n%s", a.Code, stdout.String(), stderr.String())
	}
	return a
}

// report logs what the run saw, for the test log.
func (r *failoverResult) report(t *testing.T) {
	t.Helper()
	t.Logf("kill of %s: replica %s promoted after %s; restarted victim replicating it after %s; first 200 of a grab of the victim's shards sent after %s: %s after the kill; queues drained %s after the load (%s)",
		r.victim, r.replica, r.promotedAfter.Round(time.Millisecond), r.reattachedAfter.Round(time.Millisecond),
		r.readyAfter.Round(time.Millisecond), durOrNever(r.resumedAfter), r.drainedAfter.Round(time.Millisecond), orText(r.undrained, "all"))
	t.Logf("load: %s", r.log.summary())
	if !r.cut.IsZero() {
		// Whether the flusher took any grab of the cut to PostgreSQL before
		// the kill decides whether their loss can be seen (see
		// checkLossAccounted).
		t.Logf("replica cut off at %s from the kill; the latest answer of the killed master that postgres holds came at %s",
			rel(r.cut, r.killed), rel(r.lastKept, r.killed))
	}
	r.logFirstRepeats(t)
	phases := r.phaseCounts()
	t.Logf("answers to grabs of the victim's envelopes by phase: %s", phases)
	t.Logf("answered 200: %d users; in postgres as answered: %d; lost (not in postgres): %d; postgres holds another packet: %d; packets answered to two users: %d; claims of users with no definitive answer: %d; claims never answered: %d",
		r.answered, r.inPG, len(r.lost), len(r.differ), len(r.twice), r.unknownPG, len(r.strangers))
	r.logMismatches(t)
	r.logEnvelopes(t)
}

// logFirstRepeats logs the first requests answered as repeats (the first 5).
func (r *failoverResult) logFirstRepeats(t *testing.T) {
	t.Helper()
	firstRepeat := 0
	for _, e := range r.log.eventsCopy() {
		if e.Status == 200 && e.Repeat && !e.Retry {
			if firstRepeat++; firstRepeat <= 5 {
				t.Logf("first request of user %s (envelope %d) answered as a repeat, packet %d, at %s relative to the kill",
					e.User, e.Env, e.Packet, rel(e.Got, r.killed))
			}
		}
	}
	if firstRepeat > 0 {
		t.Logf("%d first requests answered as repeats", firstRepeat)
	}
}

// logMismatches logs the answers PostgreSQL does not hold as answered and
// the claims never answered (the first 10 of each kind).
func (r *failoverResult) logMismatches(t *testing.T) {
	t.Helper()
	for i, e := range r.lost {
		if i == 10 {
			t.Logf("... %d lost in all", len(r.lost))
			break
		}
		t.Logf("lost: envelope %d (%s) user %s packet %d, sent %s, answered %s relative to the kill",
			e.Env, r.status[e.Env], e.User, e.Packet, rel(e.Sent, r.killed), rel(e.Got, r.killed))
	}
	for i, e := range r.differ {
		if i == 10 {
			t.Logf("... %d in all", len(r.differ))
			break
		}
		t.Logf("postgres holds another packet: envelope %d (%s) user %s answered packet %d at %s relative to the kill",
			e.Env, r.status[e.Env], e.User, e.Packet, rel(e.Got, r.killed))
	}
	n := 0
	for p, es := range r.twice {
		if n++; n > 10 {
			t.Logf("... %d packets in all", len(r.twice))
			break
		}
		var who []string
		for _, e := range es {
			who = append(who, fmt.Sprintf("%s at %s", e.User, rel(e.Got, r.killed)))
		}
		t.Logf("packet %d of envelope %d (%s) answered to %s", p, es[0].Env, r.status[es[0].Env], strings.Join(who, " and "))
	}
	for i, s := range r.strangers {
		if i == 10 {
			break
		}
		t.Logf("stranger: %s", s)
	}
}

// logEnvelopes logs the envelopes' statuses, the claim conflicts and the
// audit.
func (r *failoverResult) logEnvelopes(t *testing.T) {
	t.Helper()
	var st []string
	for _, id := range r.ids {
		s := fmt.Sprintf("%d:%s", id, r.status[id])
		if r.onVictim[id] {
			s += "(victim)"
		}
		if r.reasons[id] != "" {
			s += fmt.Sprintf(" [%s]", r.reasons[id])
		}
		st = append(st, s)
	}
	t.Logf("envelopes: %s", strings.Join(st, ", "))
	for i, c := range r.conflicts {
		if i == 10 {
			t.Logf("... %d claim conflicts in all", len(r.conflicts))
			break
		}
		t.Logf("claim conflict: %s", c)
	}
	t.Logf("audit: exit %d, ok %v, %d violations, %d conflicts, suspended %v", r.audit.Code, r.audit.OK,
		len(r.audit.Violations), r.audit.Conflicts, r.audit.Suspended)
	for i, v := range r.audit.Violations {
		if i == 10 {
			t.Logf("... %d violations in all", len(r.audit.Violations))
			break
		}
		t.Logf("audit violation: envelope %d %s: %s", v.EnvelopeID, v.Check, v.Detail)
	}
}

// phaseCounts counts the answers to grabs of the victim's envelopes by when
// they were sent: before the kill, until the replica's promotion, until the
// restarted victim replicates the new master (RestartVictim), and after.
func (r *failoverResult) phaseCounts() string {
	promoted, ready := r.killed.Add(r.promotedAfter), r.killed.Add(r.readyAfter)
	phase := func(e grabEvent) string {
		switch {
		case e.Sent.Before(r.killed):
			return "before"
		case e.Sent.Before(promoted):
			return "outage"
		case e.Sent.Before(ready):
			return "unreplicated"
		}
		return "after"
	}
	counts := map[string]map[string]int{}
	for _, e := range r.log.eventsCopy() {
		if !r.onVictim[e.Env] {
			continue
		}
		p := phase(e)
		if counts[p] == nil {
			counts[p] = map[string]int{}
		}
		counts[p][e.key()]++
	}
	var b strings.Builder
	for _, p := range []string{"before", "outage", "unreplicated", "after"} {
		if counts[p] == nil {
			continue
		}
		var ks []string
		for k := range counts[p] {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		fmt.Fprintf(&b, " %s{", p)
		for i, k := range ks {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "[%s]=%d", k, counts[p][k])
		}
		b.WriteString("}")
	}
	return strings.TrimSpace(b.String())
}

func rel(at, ref time.Time) string {
	return fmt.Sprintf("%+dms", at.Sub(ref).Milliseconds())
}

func durOrNever(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return d.Round(time.Millisecond).String()
}

func orText(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}
