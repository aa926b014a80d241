// Package grab is the grabber's business logic: create an envelope (ids,
// split, PostgreSQL, then Redis), grab a packet (the Lua script), and report
// an envelope's status. It knows nothing of HTTP.
package grab

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/envelope"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
)

// Errors the API answers with; everything else is internal.
var (
	ErrNotFound    = errors.New("no such envelope")
	ErrSoldOut     = errors.New("no packet left")
	ErrExpired     = errors.New("envelope has expired")
	ErrUnavailable = errors.New("temporarily unavailable")
	ErrNotStarted  = errors.New("envelope has not started yet")
	// ErrNotRecipient: the envelope has recipients and the user is not one.
	ErrNotRecipient = errors.New("not a recipient of this envelope")
	// ErrWrongPassword: the envelope has a password and the grab carried
	// another one, or none.
	ErrWrongPassword = errors.New("wrong password")
)

// NotOpenedError is a create whose envelope was written but could not be
// opened (Redis failed): the envelope exists, stays loading, and the
// flusher opens it (or gives it up and refunds it). It is ErrUnavailable
// too; its caller must not create the envelope again.
type NotOpenedError struct {
	EnvelopeID int64
	Err        error
}

func (e *NotOpenedError) Error() string {
	return fmt.Sprintf("envelope %d written but not opened: %v", e.EnvelopeID, e.Err)
}

func (e *NotOpenedError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }

// EnvelopeIDMaxAge is the sequence.Options.MaxAge of envelope ids: ids of
// envelopes created more than about this far apart (and a reservation's
// round trip), by any processes, are
// in the order they were created, so a user's history (by envelope) is in
// creation order too.
const EnvelopeIDMaxAge = time.Second

// IDs hands out unique ids; *sequence.Allocator is one.
type IDs interface {
	Next(ctx context.Context) (int64, error)
	Block(ctx context.Context, n int64) (int64, error)
}

// Codes hands out unique strings: share codes of a day, *ids.ShareCodes'
// NextOn.
type Codes interface {
	NextOn(ctx context.Context, now time.Time, skip int) (string, error)
}

// ShortIDs maps a user to a short numeric id, always the same one.
type ShortIDs interface {
	Get(ctx context.Context, userID string) (int64, error)
}

// Service is safe for concurrent use.
type Service struct {
	pg        *pgstore.Store
	redis     *redisstore.Store
	envIDs    IDs
	packetIDs IDs
	shares    Codes
	shortIDs  ShortIDs
	limits    envelope.Limits
	safety    safety
	now       func() time.Time
	log       *zap.Logger
	rands     sync.Pool // *rand.Rand, crypto-seeded
}

// Config holds what a Service needs.
type Config struct {
	PG        *pgstore.Store
	Redis     *redisstore.Store
	EnvIDs    IDs // allocator of the "envelope" sequence
	PacketIDs IDs // allocator of the "packet" sequence
	Shares    Codes
	ShortIDs  ShortIDs
	Limits    envelope.Limits
	Safety    Safety           // idempotency keys' time to live, per-user and per-sender limits
	Now       func() time.Time // nil means time.Now; tests set a clock
	Log       *zap.Logger
}

// New returns a Service.
func New(c Config) *Service {
	s := &Service{
		pg: c.PG, redis: c.Redis, envIDs: c.EnvIDs, packetIDs: c.PacketIDs,
		shares: c.Shares, shortIDs: c.ShortIDs,
		limits: c.Limits, now: c.Now, log: c.Log,
	}
	s.safety = newSafety(c.Safety)
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.rands.New = func() any { return envelope.NewRand() }
	return s
}

// Now is the service's clock, truncated to the millisecond that Redis and
// the API speak in.
func (s *Service) Now() time.Time { return s.now().UTC().Truncate(time.Millisecond) }

func (s *Service) split(kind envelope.Kind, total int64, count int) ([]int64, error) {
	if kind == envelope.KindFixed {
		return envelope.Fixed(total, count)
	}
	r := s.rands.Get().(*rand.Rand)
	defer s.rands.Put(r)
	return envelope.SplitCapped(total, count, s.limits.MaxPacketCents, r)
}
