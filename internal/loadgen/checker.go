package loadgen

import (
	"fmt"
	"sync"
)

// maxViolationTexts bounds the violations kept as text; all are counted.
const maxViolationTexts = 50

// Grant is a packet answered to a user.
type Grant struct {
	PacketID    int64
	AmountCents int64
	OrderNo     string
}

// Checker checks every answer against what the service promises, as the
// answers arrive: a user holds at most one packet of an envelope and a repeat
// answers that same packet; a packet goes to at most one user; an envelope
// never grants more packets or cents than it has, and grants exactly its total
// when every packet is gone. It is safe for concurrent use.
type Checker struct {
	mu         sync.Mutex
	envs       map[int64]*envCheck
	texts      []string
	violations int
}

type envCheck struct {
	count    int
	total    int64
	byUser   map[string]Grant
	byPacket map[int64]string
	granted  int
	cents    int64
	// refusedSoldOut: a first grab was answered sold_out.
	refusedSoldOut bool
	// unanswered are users whose first grab got no usable answer (transport
	// error, 5xx): the service may have granted them a packet we never saw.
	unanswered map[string]bool
}

// NewChecker returns an empty checker.
func NewChecker() *Checker { return &Checker{envs: map[int64]*envCheck{}} }

// AddEnvelope registers an envelope of count packets and total cents.
func (c *Checker) AddEnvelope(id int64, count int, total int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.envs[id] = &envCheck{count: count, total: total, byUser: map[string]Grant{},
		byPacket: map[int64]string{}, unanswered: map[string]bool{}}
}

// Violation records a broken promise.
func (c *Checker) Violation(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violationLocked(format, args...)
}

func (c *Checker) violationLocked(format string, args ...any) {
	c.violations++
	if len(c.texts) < maxViolationTexts {
		c.texts = append(c.texts, fmt.Sprintf(format, args...))
	}
}

// Granted checks a 200 answer to user's grab of envelope env. repeatAsked says
// the tool sent this grab as a repeat of one answered before; answeredRepeat
// is the answer's "repeat" field. It reports whether the answer is a new
// grant (a packet the checker had not seen for this user).
func (c *Checker) Granted(env int64, user string, repeatAsked bool, answerEnv int64, g Grant, answeredRepeat bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.envs[env]
	if e == nil {
		c.violationLocked("envelope %d: answer for an envelope the tool did not create", env)
		return false
	}
	if answerEnv != env {
		c.violationLocked("envelope %d: grab by %s answered for envelope %d", env, user, answerEnv)
	}
	if g.PacketID <= 0 || g.AmountCents <= 0 {
		c.violationLocked("envelope %d: %s answered packet %d of %d cents", env, user, g.PacketID, g.AmountCents)
	}
	if prev, ok := e.byUser[user]; ok {
		switch {
		case prev != g:
			c.violationLocked("envelope %d: user %s answered two packets: %+v, then %+v", env, user, prev, g)
		case !answeredRepeat:
			c.violationLocked("envelope %d: user %s grabbed again and packet %d was answered as new (repeat=false)", env, user, g.PacketID)
		}
		return false
	}
	if repeatAsked {
		c.violationLocked("envelope %d: repeat grab by %s, who holds no packet the tool knows of", env, user)
	} else if answeredRepeat {
		// Every first grab is by a user id never used on this envelope.
		c.violationLocked("envelope %d: first grab by %s answered as a repeat (packet %d)", env, user, g.PacketID)
	}
	if owner, ok := e.byPacket[g.PacketID]; ok {
		c.violationLocked("envelope %d: packet %d answered to two users: %s and %s", env, g.PacketID, owner, user)
	}
	e.byUser[user] = g
	e.byPacket[g.PacketID] = user
	e.granted++
	e.cents += g.AmountCents
	if e.granted > e.count {
		c.violationLocked("envelope %d: %d packets granted, it has %d", env, e.granted, e.count)
	}
	if e.cents > e.total {
		c.violationLocked("envelope %d: %d cents granted, its total is %d", env, e.cents, e.total)
	}
	return true
}

// Refused checks an answer other than 200. A holder's repeat must always get
// its packet, so a repeat refused with sold_out or expired is a violation.
// A first grab that got no usable answer is remembered as unanswered.
func (c *Checker) Refused(env int64, user string, repeatAsked bool, status int, code string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.envs[env]
	if e == nil {
		return
	}
	switch {
	case repeatAsked && status == 409:
		c.violationLocked("envelope %d: repeat grab by %s (holding packet %d) answered %d %s",
			env, user, e.byUser[user].PacketID, status, code)
	case !repeatAsked && code == "sold_out":
		e.refusedSoldOut = true
	case !repeatAsked && (status == 0 || status >= 500 || code == codeUndecodable):
		e.unanswered[user] = true
	}
}

// Finish runs the checks that need the whole run: an envelope whose every
// packet was granted granted exactly its total, and an envelope that answered
// sold_out has no packet unaccounted for (unless some first grabs went
// unanswered, whose packets the tool cannot know).
func (c *Checker) Finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, e := range c.envs {
		if e.granted == e.count && e.cents != e.total {
			c.violationLocked("envelope %d: all %d packets granted for %d cents, its total is %d", id, e.count, e.cents, e.total)
		}
		if e.refusedSoldOut && e.granted < e.count && len(e.unanswered) == 0 {
			c.violationLocked("envelope %d: answered sold_out with only %d of %d packets granted", id, e.granted, e.count)
		}
	}
}

// Owner returns the user a packet of env was answered to.
func (c *Checker) Owner(env, packet int64) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.envs[env]; e != nil {
		u, ok := e.byPacket[packet]
		return u, ok
	}
	return "", false
}

// Unanswered reports whether user's first grab of env got no usable answer.
func (c *Checker) Unanswered(env int64, user string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.envs[env]
	return e != nil && e.unanswered[user]
}

// SoldOut reports whether every packet of env has been granted.
func (c *Checker) SoldOut(env int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.envs[env]
	return e != nil && e.granted >= e.count
}

// EnvelopeTotals are what the checker saw granted in one envelope.
type EnvelopeTotals struct {
	Granted      int
	GrantedCents int64
	Unanswered   int
}

// Totals returns the grants seen in env.
func (c *Checker) Totals(env int64) EnvelopeTotals {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.envs[env]
	if e == nil {
		return EnvelopeTotals{}
	}
	return EnvelopeTotals{Granted: e.granted, GrantedCents: e.cents, Unanswered: len(e.unanswered)}
}

// Violations returns how many violations were found and the text of the
// first ones.
func (c *Checker) Violations() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.violations, append([]string(nil), c.texts...)
}
