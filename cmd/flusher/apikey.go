package main

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/pgstore"
)

// The flags of the apikey commands, as their usage shows them.
const (
	apikeyCreateSynopsis = "-name NAME [-client CLIENT] -scopes create,grab,read,events"
	apikeyListSynopsis   = "[-all] [-json]"
	apikeyRevokeSynopsis = "-name NAME"
)

// keysDB opens PostgreSQL alone, which is all the apikey commands need (a
// key can be made or revoked while Redis is down), and checks the schema.
// The returned close closes it and ends ctx; ctx ends too at the operator
// commands' fixed time limit.
func keysDB() (context.Context, *pgxpool.Pool, func(), error) {
	return keysDBWithin(operatorTimeout, false)
}

// keysDBWithin is keysDB with a time limit of the command's (flag: set by
// its -timeout).
func keysDBWithin(limit time.Duration, flag bool) (context.Context, *pgxpool.Pool, func(), error) {
	cfg, log, err := loadConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := commandContext(limit, flag)
	pool, err := pgstore.Connect(ctx, cfg.DatabaseURL, 0)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	if err := pgstore.CheckSchema(ctx, pool); err != nil {
		pool.Close()
		cancel()
		return nil, nil, nil, errors.Join(err, errorHint("run flusher migrate first"))
	}
	return ctx, pool, func() { pool.Close(); cancel(); _ = log.Sync() }, nil
}

// errorHint is a line of advice after an error.
type errorHint string

func (h errorHint) Error() string { return string(h) }
