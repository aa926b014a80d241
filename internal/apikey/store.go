package apikey

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/envelope"
)

// What the operator commands can be refused.
var (
	ErrNameTaken = errors.New("an active key already has this name")
	ErrNoSuchKey = errors.New("no active key has this name")
)

// The unique index that holds one active key per name (migration 000009).
const activeNameIndex = "api_keys_active_name_idx"

// Create makes a key of the given name, client and scopes, stores its hash
// and returns it: the only time anyone sees it. An empty client is the
// name: a client of one key. A rotation makes the new key with the old
// one's client, so the client's idempotency keys and limits carry over.
func Create(ctx context.Context, db dbsqlc.DBTX, name, client string, scopes Scopes) (string, error) {
	if client == "" {
		client = name
	}
	if err := checkName(name); err != nil {
		return "", err
	}
	if envelope.ValidateUserID("client", client) != nil {
		return "", fmt.Errorf("%w client %q: must be 1 to 64 characters of A-Z a-z 0-9 _ . : @ -", ErrMalformed, client)
	}
	if scopes == 0 {
		return "", fmt.Errorf("%w scopes: a key needs at least one", ErrMalformed)
	}
	key, err := newKey()
	if err != nil {
		return "", err
	}
	h := hashOf(key)
	_, err = dbsqlc.New(db).CreateAPIKey(ctx, dbsqlc.CreateAPIKeyParams{Name: name, Client: client, KeyHash: h[:],
		Scopes: scopes.Names()})
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == activeNameIndex:
		return "", fmt.Errorf("%w: %q (revoke it first, or choose another name)", ErrNameTaken, name)
	case err != nil:
		return "", fmt.Errorf("store the key: %w", err)
	}
	return key, nil
}

// Listed is a key as `flusher apikey list` shows it: never its material.
type Listed struct {
	Name       string     `json:"name"`
	Client     string     `json:"client"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// List returns the active keys by name, and the revoked ones too when
// includeRevoked.
func List(ctx context.Context, db dbsqlc.DBTX, includeRevoked bool) ([]Listed, error) {
	rows, err := dbsqlc.New(db).ListAPIKeys(ctx, includeRevoked)
	if err != nil {
		return nil, fmt.Errorf("list the keys: %w", err)
	}
	out := make([]Listed, 0, len(rows))
	for _, r := range rows {
		out = append(out, Listed{Name: r.Name, Client: r.Client, Scopes: r.Scopes, CreatedAt: r.CreatedAt,
			LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt})
	}
	return out, nil
}

// Revoke revokes the active key of that name. Every grabber refuses it
// within a few seconds (Keyring).
func Revoke(ctx context.Context, db dbsqlc.DBTX, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	n, err := dbsqlc.New(db).RevokeAPIKey(ctx, name)
	switch {
	case err != nil:
		return fmt.Errorf("revoke the key: %w", err)
	case n == 0:
		return fmt.Errorf("%w: %q", ErrNoSuchKey, name)
	}
	return nil
}
