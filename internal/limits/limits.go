// Package limits keeps users and senders within their bounds, each off
// unless configured: grabs a second per user (a token bucket), packets a
// user may receive a day, and cents a sender may put into envelopes a day.
// The counters live in Redis, a user's on one slot, so each check and its
// count are one atomic script; with API keys, each client's users and
// senders are counted apart.
package limits

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisscript"
	"redpacket/internal/redisstore"
)

// ErrExceeded: a daily limit is reached.
var ErrExceeded = errors.New("daily limit reached")

// RateLimitedError: the user's grabs a second are used up.
type RateLimitedError struct {
	RetryAfter time.Duration // until a grab is admitted again
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("too many grabs; retry after %s", e.RetryAfter)
}

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up, at least 1.
func (e *RateLimitedError) RetryAfterSeconds() int64 {
	return max(1, int64(math.Ceil(e.RetryAfter.Seconds())))
}

// Config sets the limits; zero turns one off.
type Config struct {
	UserGrabRate     int   // grabs a second per user, also the bucket's size
	UserDailyGrabs   int   // packets a user may receive a day
	SenderDailyCents int64 // cents a sender may put into envelopes a day
	Location         *time.Location
}

// counterTTL is how long a day's counter is kept: past the end of its day
// in any time zone.
const counterTTL = 50 * time.Hour

// Limiter checks and counts. Its methods do nothing when their limit is off.
type Limiter struct {
	rdb   redis.UniversalClient
	keys  redisstore.Keys
	c     Config
	admit *admitter
}

// New returns a Limiter, or nil when every limit is off.
func New(rdb redis.UniversalClient, keys redisstore.Keys, c Config) *Limiter {
	if c.UserGrabRate == 0 && c.UserDailyGrabs == 0 && c.SenderDailyCents == 0 {
		return nil
	}
	if c.Location == nil {
		c.Location = time.UTC
	}
	return &Limiter{rdb: rdb, keys: keys, c: c, admit: &admitter{rdb: rdb}}
}

// LimitsGrabs reports whether grabs are limited at all.
func (l *Limiter) LimitsGrabs() bool {
	return l != nil && (l.c.UserGrabRate > 0 || l.c.UserDailyGrabs > 0)
}

func (l *Limiter) day(now time.Time) string { return now.In(l.c.Location).Format("20060102") }

// Reservation is what AdmitGrab took; Release gives it back.
type Reservation struct {
	keys []string
	day  bool
}

// AdmitGrab takes a token and reserves a packet of the user's day, or
// returns *RateLimitedError or ErrExceeded having taken nothing. Grabs that
// arrive together share a round trip (admitter).
func (l *Limiter) AdmitGrab(ctx context.Context, client, userID string, now time.Time) (Reservation, error) {
	keys := []string{l.keys.UserGrabRate(client, userID), l.keys.UserDailyGrabs(client, userID, l.day(now))}
	call := &admitCall{keys: keys, args: []any{now.UnixMilli(), l.c.UserGrabRate, l.c.UserDailyGrabs,
		int64(counterTTL / time.Second)}}
	if err := l.admit.run(ctx, call); err != nil {
		return Reservation{}, err
	}
	code, payload, err := call.code, call.payload, call.err
	if err != nil {
		return Reservation{}, err
	}
	if code == rateLimited {
		ms, err := redisscript.Int(payload)
		if err != nil {
			return Reservation{}, fmt.Errorf("user_reserve.lua: %w", err)
		}
		return Reservation{}, &RateLimitedError{RetryAfter: time.Duration(ms) * time.Millisecond}
	}
	return Reservation{keys: keys, day: l.c.UserDailyGrabs > 0}, nil
}

// Release gives back the reserved packet of a grab that took none; for a
// holder's repeat (repeat), the token too. The call is sent at most once
// (redisscript's once): a release run twice would count the day low.
func (l *Limiter) Release(ctx context.Context, r Reservation, repeat bool) error {
	if r.keys == nil || (!r.day && !repeat) {
		return nil
	}
	rate := 0
	if repeat {
		rate = l.c.UserGrabRate
	}
	day := "0"
	if r.day {
		day = "1"
	}
	_, _, err := userRelease.Run(ctx, l.rdb, r.keys, rate, day)
	return err
}

// CentsReservation is what ReserveCents counted for one create; the zero
// value holds nothing.
type CentsReservation struct {
	keys []string // the sender's day counter and this create's reservation
}

// reservationTTL is how long a create's reservation can be given back: a
// create that fails later keeps its cents counted (the cap is never passed).
const reservationTTL = 10 * time.Minute

// ReserveCents counts a create's cents on the sender's day, or returns
// ErrExceeded having counted nothing. Give them back with ReleaseCents if the
// create writes no envelope. On any other error the reservation is returned
// too: the script may have run with its answer lost, and releasing it gives
// back what it counted, if anything.
func (l *Limiter) ReserveCents(ctx context.Context, client, senderID string, cents int64, now time.Time) (
	CentsReservation, error) {
	if l == nil || l.c.SenderDailyCents == 0 {
		return CentsReservation{}, nil
	}
	token := make([]byte, 12)
	_, _ = rand.Read(token) // never fails (crypto/rand)
	r := CentsReservation{keys: []string{l.keys.SenderDailyCents(client, senderID, l.day(now)),
		l.keys.SenderReservation(client, senderID, hex.EncodeToString(token))}}
	_, _, err := senderReserve.Run(ctx, l.rdb, r.keys, cents, l.c.SenderDailyCents, int64(counterTTL/time.Second),
		int64(reservationTTL/time.Second))
	if errors.Is(err, ErrExceeded) {
		return CentsReservation{}, err
	}
	return r, err
}

// ReleaseCents gives back what ReserveCents counted for r, at most once.
func (l *Limiter) ReleaseCents(ctx context.Context, r CentsReservation) error {
	if r.keys == nil {
		return nil
	}
	_, _, err := senderRelease.Run(ctx, l.rdb, r.keys)
	return err
}

// The scripts and their reply codes; each .lua file declares the same codes
// by the same names (TestScriptsDeclareTheGoCodes).
var (
	//go:embed user_reserve.lua
	userReserveSource string
	//go:embed user_release.lua
	userReleaseSource string
	//go:embed sender_reserve.lua
	senderReserveSource string
	//go:embed sender_release.lua
	senderReleaseSource string

	userReserve = redisscript.New("user_reserve.lua", userReserveSource,
		redisscript.Reply{Code: admitted, Name: "ADMITTED"},
		redisscript.Reply{Code: rateLimited, Name: "RATE_LIMITED"},
		redisscript.Reply{Code: userCapped, Name: "CAPPED", Err: ErrExceeded})
	userRelease = redisscript.New("user_release.lua", userReleaseSource,
		redisscript.Reply{Code: released, Name: "RELEASED"})
	senderReserve = redisscript.New("sender_reserve.lua", senderReserveSource,
		redisscript.Reply{Code: reserved, Name: "RESERVED"},
		redisscript.Reply{Code: senderCapped, Name: "CAPPED", Err: ErrExceeded})
	senderRelease = redisscript.New("sender_release.lua", senderReleaseSource,
		redisscript.Reply{Code: centsReleased, Name: "RELEASED"},
		redisscript.Reply{Code: centsNotHeld, Name: "NOT_HELD"})

	scripts = []*redisscript.Script{userReserve, userRelease, senderReserve, senderRelease}
)

// The bucket's fields, the words the scripts quote.
const (
	fieldTokens = "tokens"
	fieldMs     = "ms"
)

const (
	admitted      redisscript.Code = 0
	rateLimited   redisscript.Code = 1
	userCapped    redisscript.Code = 2
	released      redisscript.Code = 0
	reserved      redisscript.Code = 0
	senderCapped  redisscript.Code = 1
	centsReleased redisscript.Code = 0
	centsNotHeld  redisscript.Code = 1
)
