package e2e_test

import (
	"testing"
	"time"

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
	r := &twoGrabberRun{bases: []string{s.base, "http://" + addr}, client: grabClient()}
	waitReady(t, r.bases[1]+"/readyz")

	// Creators: two per grabber, 8 envelopes each (32 in all), of 30 to 80
	// packets, one every 100-200 ms while the grabs go on.
	const creatorsPerGrabber, perCreator = 2, 8
	began := time.Now()
	creating := r.create(creatorsPerGrabber, perCreator)

	// Grabbers: 6 workers; users from a pool of 150 grab envelopes created
	// so far, each grab sent to both grabbers at once half of the time, to
	// one of them otherwise; until the creators are done and 1.5 s more.
	stop := make(chan struct{})
	grabbers := r.grabUntil(6, stop)

	// Short user ids: 40 users ask both grabbers at once.
	shortIDs := r.shortIDs(40)

	select {
	case <-creating:
	case <-time.After(30 * time.Second):
		t.Fatal("creating the envelopes took more than 30 s")
	}
	t.Logf("envelopes created in %s", time.Since(began).Round(time.Millisecond))
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	grabbers.Wait()
	r.client.CloseIdleConnections()
	for _, p := range r.problems {
		t.Error(p)
	}

	// Identifiers handed out by the two grabbers, then the answers: one
	// packet per user and envelope whichever grabber answered, one user per
	// packet, one order number per grant.
	created0, envIDs, shorts := checkTwoGrabberIDs(t, r.envelopes, shortIDs, 2*creatorsPerGrabber*perCreator)
	tally := tallyTwoGrabberAnswers(t, r.answers)
	t.Logf("%d envelopes (%d by grabber 0), %d grab requests by status %v, %d grants (%d users answered 200 by both grabbers); 200s by grabber: %v; %d short ids",
		len(r.envelopes), created0, len(r.answers), tally.statuses, len(tally.granted), tally.both, tally.byVia, shorts)
	if tally.byVia[0] == 0 || tally.byVia[1] == 0 || len(tally.granted) < 200 || tally.both == 0 {
		t.Errorf("too little was granted to tell anything: %d grants, 200s by grabber %v, %d users answered by both", len(tally.granted), tally.byVia, tally.both)
	}

	// PostgreSQL: every envelope's packets (ids unique across envelopes,
	// the count created), and exactly the grants answered, each once.
	db := connectTestDB(t, dbURL)
	waitGrantsInPostgres(t, db, envIDs, tally.granted)
	checkPacketsInPostgres(t, db, r.envelopes, envIDs)
	assertNoConflicts(t, db)
	s.audit(t)
	s.grabber.stop(t)
	second.stop(t)
	s.flusher.stop(t)
}
