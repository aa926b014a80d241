package main

import (
	"context"
	"errors"

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
// The returned close closes it and ends ctx.
func keysDB() (context.Context, *pgxpool.Pool, func(), error) {
	cfg, log, err := loadConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := operatorContext()
	pool, err := pgstore.Connect(ctx, cfg.DatabaseURL)
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
