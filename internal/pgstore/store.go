// Package pgstore is the PostgreSQL side of the service: the connection pool,
// the schema check, and the stores the daemons work with (envelopes and their
// packets, the flusher's batch claim writes, settlement, shard epochs, the
// events feed and webhook delivery state). The SQL itself lives in the query
// layer, internal/db/dbsqlc; this package calls it, turns its rows into the
// service's types and its errors into this package's.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/db/dburl"
	"redpacket/internal/envelope"
)

// ErrNotFound means no envelope has the id asked for.
var ErrNotFound = errors.New("envelope not found")

// ErrShareCodeTaken means another envelope already has the share code: the
// caller retries with a new one.
var ErrShareCodeTaken = errors.New("share code already in use")

// Store runs the service's queries on a pool.
type Store struct {
	pool    *pgxpool.Pool
	q       *dbsqlc.Queries
	senders *senderCache
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, q: dbsqlc.New(pool), senders: newSenderCache()}
}

// Connect opens a pool (PoolConfig) and checks that the server answers.
func Connect(ctx context.Context, databaseURL string, lockTimeout time.Duration) (*pgxpool.Pool, error) {
	pc, err := PoolConfig(databaseURL, lockTimeout)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open postgres pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping postgres: %w", err)
	}
	return pool, nil
}

// PoolConfig is a pool's settings from a database URL, with what the
// service's pools need unless the URL says otherwise:
//
//   - sessions that can write (dburl.Writable), whose transactions are READ
//     COMMITTED unless they ask otherwise, whatever the database's default;
//   - with lockTimeout > 0, each session's lock_timeout, unless the URL sets
//     one: a statement waiting that long on a lock (a DBA's ALTER TABLE)
//     fails rather than holding the request and its connection for as long
//     as the lock is held.
func PoolConfig(databaseURL string, lockTimeout time.Duration) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("postgres pool settings: %w", err)
	}
	dburl.Writable(&pc.ConnConfig.Config, databaseURL)
	_, set := pc.ConnConfig.RuntimeParams["lock_timeout"]
	setLock := lockTimeout > 0 && !set && !strings.Contains(pc.ConnConfig.RuntimeParams["options"], "lock_timeout")
	ms := strconv.FormatInt(lockTimeout.Milliseconds(), 10)
	// Set once connected, not as startup parameters, which a connection
	// pooler (PgBouncer) may refuse. (Behind a pooler in transaction mode,
	// session settings would not follow the session: not supported.)
	pc.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		q := dbsqlc.New(c)
		if err := q.SessionReadCommitted(ctx); err != nil {
			return fmt.Errorf("session settings: %w", err)
		}
		if setLock {
			if err := q.SessionLockTimeout(ctx, ms); err != nil {
				return fmt.Errorf("session settings: %w", err)
			}
		}
		return nil
	}
	return pc, nil
}

// Envelope is a row of the envelopes table, as the query layer reads it
// (every column, in one column list generated from the schema).
type Envelope = dbsqlc.Envelope

// InsertEnvelope writes a new envelope (status loading) and its packets in
// one transaction. Packet ids are firstPacketID, firstPacketID+1, ...; the
// packets go in with COPY.
func (s *Store) InsertEnvelope(ctx context.Context, e Envelope, firstPacketID int64, amounts []int64) error {
	return s.InsertEnvelopeFor(ctx, e, NewEnvelope{FirstPacketID: firstPacketID, Amounts: amounts})
}

// NewEnvelope is what a create writes with an envelope's row.
type NewEnvelope struct {
	FirstPacketID int64   // packet ids are FirstPacketID, FirstPacketID+1, ...
	Amounts       []int64 // one packet each
	Recipients    []string
	Key           *IdempotencyKey
	Split         *envelope.SplitCommitment
}

// InsertEnvelopeFor is InsertEnvelope with what a create writes beside, in
// the same transaction: the users who alone may grab (Recipients; nil:
// anyone) and the split's commitment (Split; nil: none, as in tests), so a
// create that fails leaves neither. The row's kind, password digest,
// greeting, metadata and start are written as they are; RecipientsCount is
// len(Recipients). The create's idempotency key (Key; none when nil) is
// written first: a create with a key another create holds waits for that
// one's transaction, then gets ErrIdempotencyKeyTaken before it writes
// anything.
func (s *Store) InsertEnvelopeFor(ctx context.Context, e Envelope, n NewEnvelope) error {
	if e.Kind == "" {
		e.Kind = envelope.KindRandom
	}
	if len(e.Metadata) == 0 {
		e.Metadata = []byte("{}")
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := claimIdempotencyKey(ctx, q, n.Key, e.ID); err != nil {
			return err
		}
		err := q.InsertEnvelope(ctx, dbsqlc.InsertEnvelopeParams{
			ID: e.ID, Shard: e.Shard, ShareCode: e.ShareCode, SenderID: e.SenderID, TotalCents: e.TotalCents,
			Count: e.Count, CreatedAt: e.CreatedAt, ExpiresAt: e.ExpiresAt, Kind: e.Kind,
			RecipientsCount: len(n.Recipients), PasswordDigest: e.PasswordDigest, Greeting: e.Greeting,
			Metadata: e.Metadata, StartsAt: e.StartsAt,
		})
		if hasConstraint(err, "envelopes_share_code_key") {
			return fmt.Errorf("insert envelope %d: %w", e.ID, ErrShareCodeTaken)
		}
		if err != nil {
			return fmt.Errorf("insert envelope %d: %w", e.ID, err)
		}
		if len(n.Recipients) > 0 {
			if err := q.InsertRecipients(ctx, dbsqlc.InsertRecipientsParams{EnvelopeID: e.ID, UserIds: n.Recipients}); err != nil {
				return fmt.Errorf("insert recipients of envelope %d: %w", e.ID, err)
			}
		}
		packets := make([]dbsqlc.InsertPacketsParams, len(n.Amounts))
		for i, a := range n.Amounts {
			packets[i] = dbsqlc.InsertPacketsParams{ID: n.FirstPacketID + int64(i), EnvelopeID: e.ID, AmountCents: a}
		}
		if _, err := q.InsertPackets(ctx, packets); err != nil {
			return fmt.Errorf("copy packets of envelope %d: %w", e.ID, err)
		}
		if n.Split != nil {
			err := q.InsertSplitCommitment(ctx, dbsqlc.InsertSplitCommitmentParams{
				EnvelopeID: e.ID, Salt: n.Split.Salt, Commitment: n.Split.Commitment,
			})
			if err != nil {
				return fmt.Errorf("record split commitment of envelope %d: %w", e.ID, err)
			}
		}
		return nil
	})
}

// MarkLoaded moves a loading envelope to open (or straight to sold_out when
// every packet was grabbed and flushed before this ran). It returns the status
// the envelope has afterwards.
func (s *Store) MarkLoaded(ctx context.Context, id int64) (envelope.Status, error) {
	status, err := s.q.MarkLoaded(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("mark envelope %d loaded: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("mark envelope %d loaded: %w", id, err)
	}
	return status, nil
}

// Envelope reads one envelope.
func (s *Store) Envelope(ctx context.Context, id int64) (Envelope, error) {
	e, err := s.q.EnvelopeByID(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Envelope{}, fmt.Errorf("envelope %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Envelope{}, fmt.Errorf("read envelope %d: %w", id, err)
	}
	return e, nil
}

// EnvelopeByShareCode reads the envelope with a share code.
func (s *Store) EnvelopeByShareCode(ctx context.Context, code string) (Envelope, error) {
	e, err := s.q.EnvelopeByShareCode(ctx, code)
	if errors.Is(err, pgx.ErrNoRows) {
		return Envelope{}, fmt.Errorf("share code %s: %w", code, ErrNotFound)
	}
	if err != nil {
		return Envelope{}, fmt.Errorf("read envelope by share code %s: %w", code, err)
	}
	return e, nil
}

// UnclaimedPackets returns the ids and amounts of an envelope's packets that
// nobody has claimed and that were not refunded, in id order.
func (s *Store) UnclaimedPackets(ctx context.Context, envelopeID int64) (ids, amounts []int64, err error) {
	rows, err := s.q.UnclaimedPackets(ctx, envelopeID)
	if err != nil {
		return nil, nil, fmt.Errorf("unclaimed packets of envelope %d: %w", envelopeID, err)
	}
	for _, r := range rows {
		ids, amounts = append(ids, r.ID), append(amounts, r.AmountCents)
	}
	return ids, amounts, nil
}

// Recipients lists the users who may grab an envelope; none when anyone may.
func (s *Store) Recipients(ctx context.Context, envelopeID int64) ([]string, error) {
	ids, err := s.q.Recipients(ctx, envelopeID)
	if err != nil {
		return nil, fmt.Errorf("recipients of envelope %d: %w", envelopeID, err)
	}
	return ids, nil
}

// Close records the sender's early close of an open or suspended envelope
// at now, once (see CloseEnvelope); changed is false when it changed
// nothing: no such envelope, closed before, or in another status.
func (s *Store) Close(ctx context.Context, id int64, now time.Time) (changed bool, err error) {
	n, err := s.q.CloseEnvelope(ctx, dbsqlc.CloseEnvelopeParams{ID: id, ClosedAt: now})
	if err != nil {
		return false, fmt.Errorf("close envelope %d: %w", id, err)
	}
	return n > 0, nil
}

// ClaimedCount counts an envelope's claimed packets (index-only on the
// claims' primary key).
func (s *Store) ClaimedCount(ctx context.Context, envelopeID int64) (int64, error) {
	n, err := s.q.ClaimedCount(ctx, envelopeID)
	if err != nil {
		return 0, fmt.Errorf("count claims of envelope %d: %w", envelopeID, err)
	}
	return n, nil
}
