package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/db/dbsqlc"
)

// ErrIdempotencyKeyTaken means a live row of the idempotency key exists
// already: another create with the key wrote its envelope first.
var ErrIdempotencyKeyTaken = errors.New("idempotency key already used")

// ErrNoIdempotencyKey means the key has no live row.
var ErrNoIdempotencyKey = errors.New("no such idempotency key")

// IdempotencyKey is a create's key, written with its envelope.
type IdempotencyKey struct {
	Client        string // the API key's name; "" without API keys
	Key           string // the Idempotency-Key header
	RequestSHA256 []byte
	CreatedAt     time.Time
	ExpiresAt     time.Time
}

// IdempotencyRecord is what a key's row holds.
type IdempotencyRecord struct {
	RequestSHA256 []byte
	EnvelopeID    int64
	Status        int    // 0 until the answer is recorded
	Body          []byte // nil until the answer is recorded
}

// claimIdempotencyKey writes k for envelope id in the envelope's transaction.
func claimIdempotencyKey(ctx context.Context, q *dbsqlc.Queries, k *IdempotencyKey, id int64) error {
	if k == nil {
		return nil
	}
	n, err := q.ClaimIdempotencyKey(ctx, dbsqlc.ClaimIdempotencyKeyParams{
		ClientName: k.Client, IdemKey: k.Key, RequestSha256: k.RequestSHA256, EnvelopeID: id,
		CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt,
	})
	if err != nil {
		return fmt.Errorf("record idempotency key of envelope %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("envelope %d: %w", id, ErrIdempotencyKeyTaken)
	}
	return nil
}

// IdempotencyKey reads the live row of a client's key at now.
func (s *Store) IdempotencyKey(ctx context.Context, client, key string, now time.Time) (IdempotencyRecord, error) {
	row, err := s.q.LiveIdempotencyKey(ctx, dbsqlc.LiveIdempotencyKeyParams{ClientName: client, IdemKey: key, Now: now})
	if errors.Is(err, pgx.ErrNoRows) {
		return IdempotencyRecord{}, ErrNoIdempotencyKey
	}
	if err != nil {
		return IdempotencyRecord{}, fmt.Errorf("read idempotency key: %w", err)
	}
	rec := IdempotencyRecord{RequestSHA256: row.RequestSha256, EnvelopeID: row.EnvelopeID, Body: row.ResponseBody}
	if row.ResponseStatus != nil {
		rec.Status = int(*row.ResponseStatus)
	}
	return rec, nil
}

// SaveIdempotentResponse records the answer to the create that made
// envelope id with the key, unless an answer is recorded already, and
// returns the recorded answer: the one every repeat gets.
func (s *Store) SaveIdempotentResponse(ctx context.Context, client, key string, id int64, status int, body []byte) (int, []byte, error) {
	row, err := s.q.SaveIdempotentResponse(ctx, dbsqlc.SaveIdempotentResponseParams{
		ResponseStatus: int32(status), ResponseBody: body, ClientName: client, IdemKey: key, EnvelopeID: id,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, fmt.Errorf("record answer of envelope %d: %w", id, ErrNoIdempotencyKey)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("record answer of envelope %d: %w", id, err)
	}
	return int(row.Status), row.Body, nil
}

// PruneIdempotencyKeys deletes up to maxRows keys expired at now and
// returns how many it deleted.
func (s *Store) PruneIdempotencyKeys(ctx context.Context, now time.Time, maxRows int) (int64, error) {
	n, err := s.q.PruneIdempotencyKeys(ctx, dbsqlc.PruneIdempotencyKeysParams{Now: now, MaxRows: int32(maxRows)})
	if err != nil {
		return 0, fmt.Errorf("delete expired idempotency keys: %w", err)
	}
	return n, nil
}
