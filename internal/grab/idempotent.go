package grab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/envelope"
	"redpacket/internal/idempotency"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/reqctx"
)

// GivenUpError answers a keyed create whose key's envelope was given up
// (failed, its money refunded): the key stays bound to that envelope for
// its time to live, so retrying it can never create one; the client must
// create again with another key. It is ErrUnavailable too.
type GivenUpError struct {
	EnvelopeID int64
}

func (e *GivenUpError) Error() string {
	return fmt.Sprintf("envelope %d of this idempotency key was given up and refunded", e.EnvelopeID)
}

func (e *GivenUpError) Unwrap() error { return ErrUnavailable }

// pruneKeys is how many expired idempotency keys a keyed create deletes:
// more than one, so that deleting keeps ahead of creating.
const pruneKeys = 16

// createMarkTTL bounds how long a keyed create's mark (Keys.CreateUnderWay)
// outlives a grabber that died making it. A create that takes longer (one
// waiting on a lock a DBA holds) renews its mark every third of it
// (keepMark): a repeat is told to wait, not refused for the cents this one
// holds, nor left waiting on this one's uncommitted key.
const createMarkTTL = time.Minute

// Render turns a created envelope into the answer's body.
type Render func(Envelope) ([]byte, error)

// CreateIdempotent is Create for a request that carries an idempotency key
// (scoped to the request's client in keys mode). The first request with the
// key creates the envelope and writes the key with it in one transaction; a
// repeat with the same body, within the key's time to live, gets the first
// answer byte for byte (Replayed) and creates nothing; a repeat with another
// body is idempotency.ErrMismatch; one arriving while the first has not
// finished is idempotency.ErrInProgress. Only a create that made an envelope
// is remembered: one refused (an invalid request) may be sent again.
func (s *Service) CreateIdempotent(ctx context.Context, req envelope.CreateRequest, ir idempotency.Request,
	render Render) (idempotency.Answer, error) {
	client, _ := reqctx.ClientName(ctx)
	now := s.Now()
	rec, err := s.pg.IdempotencyKey(ctx, client, ir.Key, now)
	switch {
	case err == nil:
		return s.repeat(ctx, client, req, ir, rec, render)
	case !errors.Is(err, pgstore.ErrNoIdempotencyKey):
		return idempotency.Answer{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	// A repeat sent before this create has written its key (it is taking
	// ids, or reserving the sender's cents) finds the mark and is told to
	// wait (409), rather than refused for the cents this one holds or made
	// again. The mark outlives a create that dies (createMarkTTL); past it,
	// the key row decides (a repeat waits on the first's uncommitted key, up
	// to the grabber's lock_timeout).
	mark, err := s.redis.MarkCreate(ctx, client, ir.Key, ir.Fingerprint, s.safety.createMarkTTL)
	switch {
	case errors.Is(err, redisstore.ErrCreateUnderWay):
		return idempotency.Answer{}, idempotency.ErrInProgress
	case errors.Is(err, redisstore.ErrCreateOtherBody):
		return idempotency.Answer{}, idempotency.ErrMismatch
	case err != nil:
		// The mark may be set, its answer lost: ended, or this request's
		// retry would be told for a minute that it is under way.
		_ = s.redis.UnmarkCreate(context.WithoutCancel(ctx), client, ir.Key, mark)
		return idempotency.Answer{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer func() {
		if err := s.redis.UnmarkCreate(context.WithoutCancel(ctx), client, ir.Key, mark); err != nil {
			reqctx.Logger(ctx, s.log).Warn("idempotent create's mark not removed; it expires", zap.Error(err))
		}
	}()
	defer s.keepMark(ctx, client, ir.Key, mark)()
	key := &pgstore.IdempotencyKey{Client: client, Key: ir.Key, RequestSHA256: ir.Fingerprint,
		CreatedAt: now, ExpiresAt: now.Add(s.safety.idempotencyTTL)}
	e, err := s.create(ctx, req, key)
	if errors.Is(err, pgstore.ErrIdempotencyKeyTaken) {
		// Another request with the key wrote its envelope while this one
		// was preparing its own, which was rolled back.
		rec, err := s.pg.IdempotencyKey(ctx, client, ir.Key, now)
		if err != nil {
			return idempotency.Answer{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return s.repeat(ctx, client, req, ir, rec, render)
	}
	if err != nil {
		return idempotency.Answer{}, err
	}
	// The envelope is written: its answer is recorded even if the caller
	// went away meanwhile, or the retry would get an answer rebuilt from
	// the envelope as it is by then, not the first one.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	s.pruneKeys(ctx, now)
	return s.record(ctx, client, ir.Key, e, render, false)
}

// keepMark renews a keyed create's mark every third of its lifetime until
// the returned stop is called (which waits for the renewer to end). A
// renewal that fails is tried again at the next; a mark found gone (another
// create's now) is left alone.
func (s *Service) keepMark(ctx context.Context, client, key, mark string) (stop func()) {
	ttl := s.safety.createMarkTTL
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl/3)
			err := s.redis.RenewCreateMark(rctx, client, key, mark, ttl)
			cancel()
			switch {
			case errors.Is(err, redisstore.ErrCreateMarkGone):
				reqctx.Logger(ctx, s.log).Warn("idempotent create's mark expired while it was under way",
					zap.String("client", client), zap.String("idempotency_key", key))
				return
			case err != nil:
				reqctx.Logger(ctx, s.log).Warn("idempotent create's mark not renewed; will retry",
					zap.String("client", client), zap.String("idempotency_key", key), zap.Error(err))
			}
		}
	}()
	return func() { close(done); <-ended }
}

// repeat answers a request whose key has a live row.
func (s *Service) repeat(ctx context.Context, client string, req envelope.CreateRequest, ir idempotency.Request,
	rec pgstore.IdempotencyRecord, render Render) (idempotency.Answer, error) {
	if !bytes.Equal(rec.RequestSHA256, ir.Fingerprint) {
		return idempotency.Answer{}, idempotency.ErrMismatch
	}
	if rec.Body != nil {
		return idempotency.Answer{Status: rec.Status, Body: rec.Body, Replayed: true}, nil
	}
	// No answer recorded: the first request is still loading its envelope,
	// or it finished (or went away) before recording its answer, and its
	// envelope tells which.
	e, err := s.pg.Envelope(ctx, rec.EnvelopeID)
	if err != nil {
		return idempotency.Answer{}, fmt.Errorf("%w: envelope of idempotency key: %w", ErrUnavailable, err)
	}
	switch e.Status {
	case envelope.StatusLoading:
		return idempotency.Answer{}, idempotency.ErrInProgress
	case envelope.StatusFailed:
		return idempotency.Answer{}, &GivenUpError{EnvelopeID: e.ID}
	}
	// As the create answered it: open, expiring when the request asked
	// (the same request: its fingerprint matched), though a close since
	// moved the expiry and a settlement the status. (A create answers
	// sold_out only if every packet was claimed before it was marked open,
	// which a repair of a slow create can do; such an answer is rebuilt
	// open.) A suspended one says so: it may never have opened (suspended
	// while its create was loading it), and is not on offer either way.
	out := envelopeOf(e)
	if e.Status != envelope.StatusSuspended {
		out.Status = envelope.StatusOpen
	}
	if ttl, err := envelope.ExpiresIn(req.ExpiresInSeconds); err == nil {
		out.ExpiresAt = out.StartsAt.Add(ttl)
	}
	switch out.SplitCommitment, err = s.pg.Commitment(ctx, e.ID); {
	case errors.Is(err, pgstore.ErrNoCommitment): // created before commitments were kept
	case err != nil:
		return idempotency.Answer{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return s.record(ctx, client, ir.Key, out, render, true)
}

// record writes the answer of a keyed create unless one is written already,
// and answers the one written: two requests that both finish a key's create
// answer the same bytes.
func (s *Service) record(ctx context.Context, client, key string, e Envelope, render Render,
	replayed bool) (idempotency.Answer, error) {
	body, err := render(e)
	if err != nil {
		return idempotency.Answer{}, err
	}
	status, saved, err := s.pg.SaveIdempotentResponse(ctx, client, key, e.ID, http.StatusCreated, body)
	if err != nil {
		// The envelope stands; a repeat rebuilds this answer from it.
		reqctx.Logger(ctx, s.log).Warn("answer of an idempotent create not recorded",
			zap.Int64("envelope_id", e.ID), zap.Error(err))
		return idempotency.Answer{Status: http.StatusCreated, Body: body, Replayed: replayed}, nil
	}
	return idempotency.Answer{Status: status, Body: saved, Replayed: replayed || !bytes.Equal(saved, body)}, nil
}

// pruneKeys deletes a few expired keys; a failure only leaves them for the
// next create.
func (s *Service) pruneKeys(ctx context.Context, now time.Time) {
	if _, err := s.pg.PruneIdempotencyKeys(ctx, now, pruneKeys); err != nil {
		reqctx.Logger(ctx, s.log).Warn("expired idempotency keys not deleted", zap.Error(err))
	}
}

func envelopeOf(e pgstore.Envelope) Envelope {
	out := Envelope{ID: e.ID, SenderID: e.SenderID, TotalCents: e.TotalCents, Count: e.Count,
		Status: e.Status, ExpiresAt: e.ExpiresAt, Kind: e.Kind, RecipientsCount: e.RecipientsCount,
		HasPassword: e.PasswordDigest != nil, Greeting: e.Greeting, Metadata: asCreated(e.Metadata), StartsAt: e.CreatedAt}
	if e.ShareCode != nil {
		out.ShareCode = *e.ShareCode
	}
	if e.StartsAt != nil {
		out.StartsAt = *e.StartsAt
	}
	return out
}
