package grab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/envelope"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/reqctx"
)

// Envelope is a created envelope as the API reports it.
type Envelope struct {
	ID              int64
	ShareCode       string
	SenderID        string
	TotalCents      int64
	Count           int
	Status          envelope.Status
	ExpiresAt       time.Time
	Kind            envelope.Kind
	RecipientsCount int
	HasPassword     bool
	Greeting        string
	Metadata        json.RawMessage // a JSON object
	StartsAt        time.Time
	// SplitCommitment commits to the split before the first grab (see
	// envelope.SplitCommitment).
	SplitCommitment string
}

// finishTimeout bounds the steps after the PostgreSQL commit; they run even
// if the caller goes away, because an envelope left loading waits for repair.
const finishTimeout = 10 * time.Second

// Create validates the request, allocates ids, splits the money, writes the
// envelope and its packets (status loading) in one transaction, loads the
// Redis pool (meta last) and marks the envelope open.
func (s *Service) Create(ctx context.Context, req envelope.CreateRequest) (Envelope, error) {
	return s.create(ctx, req, nil)
}

// create is Create writing key (when not nil) with the envelope.
func (s *Service) create(ctx context.Context, req envelope.CreateRequest, key *pgstore.IdempotencyKey) (Envelope, error) {
	now := s.Now()
	chk, err := s.limits.Check(req, now)
	if err != nil {
		return Envelope{}, err
	}
	giveBack, err := s.reserveCents(ctx, req, now)
	if err != nil {
		return Envelope{}, err
	}
	written := false
	defer func() {
		if !written {
			giveBack()
		}
	}()
	count := int(req.Count)
	amounts, err := s.split(chk.Kind, req.TotalCents, count)
	if err != nil {
		return Envelope{}, err
	}
	metadata, err := json.Marshal(req.Metadata)
	if err != nil || req.Metadata == nil {
		metadata = []byte("{}")
	}
	id, err := s.envIDs.Next(ctx)
	if err != nil {
		return Envelope{}, fmt.Errorf("%w: allocate envelope id: %w", ErrUnavailable, err)
	}
	firstPacket, err := s.packetIDs.Block(ctx, int64(count))
	if err != nil {
		return Envelope{}, fmt.Errorf("%w: allocate %d packet ids: %w", ErrUnavailable, count, err)
	}
	commit := envelope.CommitSplit(envelope.HandOutOrder(firstPacket, amounts))
	start := now
	row := pgstore.Envelope{
		ID: id, Shard: s.redis.Keys().Shard(id), SenderID: req.SenderID,
		TotalCents: req.TotalCents, Count: count, CreatedAt: now, Kind: chk.Kind,
		Greeting: req.Greeting, Metadata: metadata,
	}
	if !chk.StartsAt.IsZero() {
		start = chk.StartsAt
		row.StartsAt = &start
	}
	row.ExpiresAt = start.Add(chk.TTL)
	gates := redisstore.Gates{StartsAt: chk.StartsAt, Recipients: req.Recipients}
	if req.Password != nil {
		gates.PasswordDigest = envelope.PasswordDigest(id, *req.Password)
		row.PasswordDigest = &gates.PasswordDigest
	}
	with := pgstore.NewEnvelope{FirstPacketID: firstPacket, Amounts: amounts, Recipients: req.Recipients,
		Key: key, Split: &commit}
	if err := s.insert(ctx, &row, with); err != nil {
		switch s.failedInsert(ctx, id, err) {
		case insertWritten:
			written = true
			return Envelope{}, &NotOpenedError{EnvelopeID: id, Err: err}
		case insertMaybeWritten:
			written = true // its cents stay counted, see failedInsert
		}
		return Envelope{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	written = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	status, err := s.load(ctx, row, firstPacket, amounts, gates)
	if err != nil {
		reqctx.Logger(ctx, s.log).Error("envelope could not be opened; the flusher repairs or gives it up",
			zap.Int64("envelope_id", id), zap.Error(err))
		return Envelope{}, &NotOpenedError{EnvelopeID: id, Err: err}
	}
	return Envelope{
		ID: id, ShareCode: *row.ShareCode, SenderID: row.SenderID, TotalCents: row.TotalCents, Count: count,
		Status: status, ExpiresAt: row.ExpiresAt, Kind: row.Kind, RecipientsCount: len(req.Recipients),
		HasPassword: req.Password != nil, Greeting: row.Greeting, Metadata: metadata, StartsAt: start,
		SplitCommitment: commit.Commitment,
	}, nil
}

// lookUpTimeout bounds the look-up of an envelope whose insert failed.
const lookUpTimeout = 2 * time.Second

// insertOutcome is what a failed insert left in PostgreSQL.
type insertOutcome int

const (
	insertNotWritten   insertOutcome = iota
	insertWritten                    // committed although the insert failed
	insertMaybeWritten               // unknown: the look-up failed too
)

// failedInsert tells whether envelope id was written although its insert
// failed with err: a COMMIT that reached PostgreSQL but whose answer was
// lost, or during which the caller went away (pgx then reports an error
// although the server committed). Such an envelope stays loading and the
// flusher opens it, so its sender's cents must stay counted: giving them
// back would let the sender pass SENDER_DAILY_CENTS. An error PostgreSQL
// answered, or one raised before anything was sent, wrote nothing; after
// any other the envelope is read back, and found, it is named to the
// caller. Not found (a commit may still be under way, unseen) or not read,
// the cents stay counted all the same: the cap is never passed, at worst a
// create that wrote nothing holds its cents for the day.
func (s *Service) failedInsert(ctx context.Context, id int64, err error) insertOutcome {
	if nothingWritten(err) {
		return insertNotWritten
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookUpTimeout)
	defer cancel()
	log := reqctx.Logger(ctx, s.log)
	_, lookUp := s.pg.Envelope(ctx, id)
	switch {
	case errors.Is(lookUp, pgstore.ErrNotFound):
		// Not seen is not proof: a COMMIT already sent may still be on its
		// way (a WAL flush, a synchronous standby, a caller that left and
		// got its answer at once), invisible to the look-up until it ends.
		log.Warn("create failed and its envelope is not seen yet, but it may still commit; the sender's cents stay counted",
			zap.Int64("envelope_id", id), zap.Error(err))
		return insertMaybeWritten
	case lookUp != nil:
		log.Warn("create failed and whether its envelope was written is unknown; the sender's cents stay counted",
			zap.Int64("envelope_id", id), zap.Error(err), zap.NamedError("look_up", lookUp))
		return insertMaybeWritten
	}
	log.Warn("create reported failure but its envelope was written; it is not open yet",
		zap.Int64("envelope_id", id), zap.Error(err))
	return insertWritten
}

// nothingWritten reports an insert error that proves the transaction did
// not commit: a share code that could not be had, another create's
// idempotency key, or a transaction that did not commit (pgstore.NotCommitted).
func nothingWritten(err error) bool {
	return errors.Is(err, errShareCode) || errors.Is(err, pgstore.ErrShareCodeTaken) ||
		errors.Is(err, pgstore.ErrIdempotencyKeyTaken) || pgstore.NotCommitted(err)
}

// errShareCode marks a failure to draw a share code: nothing was inserted.
var errShareCode = errors.New("share code")

// shareCodeTries bounds retries when a share code is already taken, which
// only happens if Redis lost the share-code pool or counters. A rebuilt pool
// is another permutation, so each code drawn collides with today's codes at
// the share of the day already used (at half the day's pool, 20 tries all
// colliding is a one-in-a-million chance), so the first tries take the next
// codes. A counter that went back (Redis restarted from an older file)
// hands out the codes after it again, one after another: from the fourth
// try on, each passes over twice as many as the one before (1, 2, 4, ...,
// 65,536 at the twentieth: 131,071 in all), never past the day's last code,
// so 20 tries reach past more codes than a day has (90,000) and end on a
// free one or at the day's end, having passed over fewer free codes than
// were handed out again. A try costs one Redis call and an insert refused
// before its packets are copied.
const (
	shareCodeTries  = 20
	shareCodeLinear = 3 // tries that take the next code before skipping
)

// insert gives the envelope a share code of its creation's day and writes it
// with its packets.
func (s *Service) insert(ctx context.Context, row *pgstore.Envelope, n pgstore.NewEnvelope) error {
	skip := 0
	for try := 1; ; try++ {
		code, err := s.shares.NextOn(ctx, row.CreatedAt, skip)
		if err != nil {
			return fmt.Errorf("%w: %w", errShareCode, err)
		}
		row.ShareCode = &code
		err = s.pg.InsertEnvelopeFor(ctx, *row, n)
		if !errors.Is(err, pgstore.ErrShareCodeTaken) || try == shareCodeTries {
			return err
		}
		reqctx.Logger(ctx, s.log).Warn("share code already in use; taking another", zap.String("share_code", code),
			zap.Int("skipped", skip))
		if try >= shareCodeLinear {
			skip = max(1, 2*skip)
		}
	}
}

func (s *Service) load(ctx context.Context, e pgstore.Envelope, firstPacket int64, amounts []int64, g redisstore.Gates) (envelope.Status, error) {
	packets := make([]redisstore.Packet, len(amounts))
	for i, a := range amounts {
		packets[i] = redisstore.Packet{ID: firstPacket + int64(i), AmountCents: a}
	}
	if _, err := s.redis.LoadGated(ctx, "", e.ID, e.ExpiresAt, e.TotalCents, packets, g); err != nil {
		return "", err
	}
	status, err := s.pg.MarkLoaded(ctx, e.ID)
	if err != nil {
		return "", err
	}
	switch status {
	case envelope.StatusOpen, envelope.StatusSoldOut:
		return status, nil
	}
	// The flusher gave it up (failed) or suspended it while this was slow.
	return "", fmt.Errorf("envelope %d is %s", e.ID, status)
}
