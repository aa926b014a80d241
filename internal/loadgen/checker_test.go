package loadgen

import (
	"strings"
	"testing"
)

// step is one answer fed to the checker.
type step struct {
	user        string
	repeatAsked bool
	grant       Grant
	answeredRep bool
	status      int    // 0: a 200 with grant; else a refusal with code
	code        string // refusal code
	answerEnv   int64  // 0: the envelope asked
}

func feed(c *Checker, env int64, steps []step) {
	for _, s := range steps {
		if s.status != 0 {
			c.Refused(env, s.user, s.repeatAsked, s.status, s.code)
			continue
		}
		ae := s.answerEnv
		if ae == 0 {
			ae = env
		}
		c.Granted(env, s.user, s.repeatAsked, ae, s.grant, s.answeredRep)
	}
}

// grantOf is packet id of cents with an order number made from the id.
func grantOf(id, cents int64) Grant {
	return Grant{PacketID: id, AmountCents: cents, OrderNo: "o" + string(rune('0'+id))}
}

// checkerCases are answer sequences for envelope 7 of count packets and
// total cents, each with the one violation the checker must report.
var checkerCases = []struct {
	name  string
	count int
	total int64
	steps []step
	want  string // substring of the one expected violation; "" for none
}{
	{name: "clean run, sold out, repeat answered the same", count: 2, total: 10, steps: []step{
		{user: "a", grant: grantOf(1, 4)},
		{user: "b", grant: grantOf(2, 6)},
		{user: "a", repeatAsked: true, grant: grantOf(1, 4), answeredRep: true},
		{user: "c", status: 409, code: "sold_out"},
	}},
	{name: "a packet answered to two users", count: 3, total: 10, steps: []step{
		{user: "a", grant: grantOf(1, 4)},
		{user: "b", grant: grantOf(1, 4)},
	}, want: "packet 1 answered to two users: a and b"},
	{name: "a repeat answered a different packet", count: 3, total: 10, steps: []step{
		{user: "a", grant: grantOf(1, 4)},
		{user: "a", repeatAsked: true, grant: grantOf(2, 3), answeredRep: true},
	}, want: "user a answered two packets"},
	{name: "a repeat answered with another order number", count: 3, total: 10, steps: []step{
		{user: "a", grant: Grant{1, 4, "x"}},
		{user: "a", repeatAsked: true, grant: Grant{1, 4, "y"}, answeredRep: true},
	}, want: "user a answered two packets"},
	{name: "a repeat answered as new", count: 3, total: 10, steps: []step{
		{user: "a", grant: grantOf(1, 4)},
		{user: "a", repeatAsked: true, grant: grantOf(1, 4)},
	}, want: "answered as new"},
	{name: "a first grab answered as a repeat", count: 3, total: 10, steps: []step{
		{user: "a", grant: grantOf(1, 4), answeredRep: true},
	}, want: "first grab by a answered as a repeat"},
	{name: "a holder's repeat refused sold out", count: 1, total: 10, steps: []step{
		{user: "a", grant: grantOf(1, 10)},
		{user: "a", repeatAsked: true, status: 409, code: "sold_out"},
	}, want: "repeat grab by a (holding packet 1) answered 409 sold_out"},
	{name: "more packets than the envelope has", count: 1, total: 10, steps: []step{
		{user: "a", grant: grantOf(1, 5)},
		{user: "b", grant: grantOf(2, 5)},
	}, want: "2 packets granted, it has 1"},
	{name: "more cents than the total", count: 3, total: 10, steps: []step{
		{user: "a", grant: grantOf(1, 6)},
		{user: "b", grant: grantOf(2, 6)},
	}, want: "12 cents granted, its total is 10"},
	{name: "every packet granted but not the whole total", count: 2, total: 10, steps: []step{
		{user: "a", grant: grantOf(1, 4)},
		{user: "b", grant: grantOf(2, 5)},
	}, want: "all 2 packets granted for 9 cents, its total is 10"},
	{name: "sold out with packets unaccounted for", count: 3, total: 10, steps: []step{
		{user: "a", grant: grantOf(1, 4)},
		{user: "b", status: 409, code: "sold_out"},
	}, want: "answered sold_out with only 1 of 3 packets granted"},
	{name: "sold out excused by an unanswered first grab", count: 2, total: 10, steps: []step{
		{user: "a", grant: grantOf(1, 4)},
		{user: "x", status: 503, code: "unavailable"},
		{user: "b", status: 409, code: "sold_out"},
	}},
	{name: "an answer for another envelope", count: 2, total: 10, steps: []step{
		{user: "a", grant: grantOf(1, 4), answerEnv: 99},
	}, want: "answered for envelope 99"},
	{name: "a packet of no cents", count: 2, total: 10, steps: []step{
		{user: "a", grant: grantOf(1, 0)},
	}, want: "answered packet 1 of 0 cents"},
}

func TestLoadgenChecker(t *testing.T) {
	for _, tt := range checkerCases {
		t.Run(tt.name, func(t *testing.T) {
			c := NewChecker()
			c.AddEnvelope(7, tt.count, tt.total)
			feed(c, 7, tt.steps)
			c.Finish()
			n, texts := c.Violations()
			if tt.want == "" {
				if n != 0 {
					t.Fatalf("violations %d: %q, want none", n, texts)
				}
				return
			}
			if n != 1 || !strings.Contains(texts[0], tt.want) {
				t.Fatalf("violations %d: %q, want one saying %q", n, texts, tt.want)
			}
		})
	}
}

func TestLoadgenCheckerTotalsAndOwners(t *testing.T) {
	c := NewChecker()
	c.AddEnvelope(1, 2, 10)
	if !c.Granted(1, "a", false, 1, Grant{5, 3, ""}, false) {
		t.Fatal("first grant not new")
	}
	if c.Granted(1, "a", true, 1, Grant{5, 3, ""}, true) {
		t.Fatal("repeat counted as new")
	}
	c.Refused(1, "z", false, 0, "")
	if got := c.Totals(1); got != (EnvelopeTotals{Granted: 1, GrantedCents: 3, Unanswered: 1}) {
		t.Errorf("Totals = %+v", got)
	}
	if u, ok := c.Owner(1, 5); !ok || u != "a" {
		t.Errorf("Owner(5) = %q, %v", u, ok)
	}
	if !c.Unanswered(1, "z") || c.Unanswered(1, "a") {
		t.Error("Unanswered wrong")
	}
	if c.SoldOut(1) {
		t.Error("SoldOut with a packet left")
	}
}

func TestLoadgenCheckerKeepsFirstTexts(t *testing.T) {
	c := NewChecker()
	for i := range maxViolationTexts + 10 {
		c.Violation("v%d", i)
	}
	n, texts := c.Violations()
	if n != maxViolationTexts+10 || len(texts) != maxViolationTexts {
		t.Errorf("got %d violations, %d texts", n, len(texts))
	}
}
