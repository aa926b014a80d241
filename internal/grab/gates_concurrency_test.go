package grab_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"redpacket/internal/envelope"
	"redpacket/internal/flush"
	"redpacket/internal/grab"
	"redpacket/internal/testenv/stack"
)

func TestConcurrentGatesHold(t *testing.T) {
	t.Parallel()
	concurrentGates(t, stack.New(t))
}

func TestClusterConcurrentGatesHold(t *testing.T) {
	t.Parallel()
	concurrentGates(t, stack.NewCluster(t))
}

// concurrentGates: two envelopes with 100 recipients and a password, hit by
// 64 goroutines (grabs coalesced into shared script calls) from 100
// recipients, each trying wrong passwords and the right one, and 200 other
// users. The
// first envelope only ever sees refused grabs: afterwards it has handed out
// nothing. On the second, exactly its 40 packets go to recipients who gave
// the password, adding up to the total, and PostgreSQL holds exactly those.
func concurrentGates(t *testing.T, s *stack.Stack) {
	ctx := context.Background()
	t.Cleanup(s.Redis.Coalesce(4, 64))
	var list []string
	for i := range gateRecipients {
		list = append(list, fmt.Sprintf("r%d", i))
	}
	pw := gatePassword
	var es [2]grab.Envelope
	for i := range es {
		e, err := s.Svc.Create(ctx, envelope.CreateRequest{SenderID: "s", TotalCents: gateTotal, Count: gatePackets,
			Recipients: list, Password: &pw})
		if err != nil {
			t.Fatal(err)
		}
		es[i] = e
	}
	won, failures := raceGateTries(ctx, s, es, gateTries(list))
	if len(failures) > 0 {
		t.Fatalf("%d bad answers, first: %s", len(failures), failures[0])
	}
	var sum int64
	for _, cents := range won {
		sum += cents
	}
	if len(won) != gatePackets || sum != gateTotal {
		t.Fatalf("%d winners holding %d cents; want %d holding %d", len(won), sum, gatePackets, gateTotal)
	}
	untouched, err := s.Svc.Status(ctx, es[0].ID)
	if err != nil || untouched.GrabbedCount != 0 || untouched.GrabbedCents != 0 || untouched.RemainingCount != gatePackets {
		t.Fatalf("refused grabs took from the first envelope: %+v, %v", untouched, err)
	}
	if n, err := s.RDB.LLen(ctx, s.Redis.Keys().Pool(es[0].ID)).Result(); err != nil || n != gatePackets {
		t.Fatalf("the first envelope's pool holds %d packets (%v), want %d", n, err, gatePackets)
	}
	if err := flush.New(s.Redis, s.PG, flush.Config{BatchSize: 200}, nil).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	checkGateClaimsInPostgres(t, s, es, won)
}

const gatePackets, gateRecipients, gateOutsiders, gateWorkers, gateTotal = 40, 100, 200, 64, 4321

var gatePassword = "口令"

// gateTry is one grab attempt: on envelope env (0 or 1), by user, with password.
type gateTry struct {
	env            int
	user, password string
}

// gateTries: each recipient gives two wrong passwords to the first envelope,
// a wrong and the right one to the second; each outsider gives the right
// password to both.
func gateTries(list []string) []gateTry {
	pw := gatePassword
	var tries []gateTry
	for i := range gateRecipients {
		tries = append(tries, gateTry{0, list[i], pw + "?"}, gateTry{0, list[i], ""},
			gateTry{1, list[i], "wrong"}, gateTry{1, list[i], pw})
	}
	for i := range gateOutsiders {
		tries = append(tries, gateTry{0, fmt.Sprintf("o%d", i), pw}, gateTry{1, fmt.Sprintf("o%d", i), pw})
	}
	return tries
}

// raceGateTries runs the tries over gateWorkers goroutines and returns the
// cents each user won and the answers that were not allowed for their try.
func raceGateTries(ctx context.Context, s *stack.Stack, es [2]grab.Envelope, tries []gateTry) (map[string]int64, []string) {
	var mu sync.Mutex
	var failures []string
	won := map[string]int64{}
	jobs := make(chan gateTry)
	var wg sync.WaitGroup
	for range gateWorkers {
		wg.Go(func() {
			for tr := range jobs {
				c, err := s.Svc.GrabWithPassword(ctx, es[tr.env].ID, tr.user, tr.password)
				ok := gateAnswerAllowed(tr, c, err)
				mu.Lock()
				if !ok {
					failures = append(failures, fmt.Sprintf("%+v: %+v, %v", tr, c, err))
				}
				if err == nil && !c.Repeat {
					won[tr.user] += c.AmountCents
				}
				mu.Unlock()
			}
		})
	}
	for _, tr := range tries {
		jobs <- tr
	}
	close(jobs)
	wg.Wait()
	return won, failures
}

// gateAnswerAllowed says whether the grab's answer is one the try may get.
func gateAnswerAllowed(tr gateTry, c grab.Claim, err error) bool {
	outsider := tr.user[0] == 'o'
	switch {
	case tr.env == 1 && !outsider && tr.password == gatePassword:
		return (err == nil && !c.Repeat) || errors.Is(err, grab.ErrSoldOut)
	case outsider:
		return errors.Is(err, grab.ErrNotRecipient) || (tr.env == 1 && errors.Is(err, grab.ErrSoldOut))
	default:
		// A recipient who has won meanwhile (another goroutine
		// ran the right password first) is answered the repeat.
		return errors.Is(err, grab.ErrWrongPassword) ||
			(tr.env == 1 && (errors.Is(err, grab.ErrSoldOut) || (err == nil && c.Repeat)))
	}
}

// checkGateClaimsInPostgres: after the flush, PostgreSQL holds exactly the
// second envelope's packets, each with the user and amount the answers gave.
func checkGateClaimsInPostgres(t *testing.T, s *stack.Stack, es [2]grab.Envelope, won map[string]int64) {
	t.Helper()
	ctx := context.Background()
	rows, err := s.Pool.Query(ctx, `SELECT envelope_id, claimed_by, amount_cents FROM packets
		WHERE envelope_id = ANY($1) AND claimed_by IS NOT NULL`, []int64{es[0].ID, es[1].ID})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var env, amount int64
		var user string
		if err := rows.Scan(&env, &user, &amount); err != nil {
			t.Fatal(err)
		}
		if env != es[1].ID || won[user] != amount {
			t.Fatalf("postgres has %s holding %d cents of envelope %d; the answers gave %d of %d", user, amount, env, won[user], es[1].ID)
		}
		n++
	}
	if rows.Err() != nil || n != gatePackets {
		t.Fatalf("postgres holds %d claims (%v), want %d", n, rows.Err(), gatePackets)
	}
}
