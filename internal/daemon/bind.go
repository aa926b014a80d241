package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"redpacket/internal/config"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
)

// bind checks what ties this process to the others of its ledger, which
// nothing else would notice differing: the settings they must share that
// this one uses (sharedSettings), a shard count that still matches every
// unfinished envelope, and a Redis whose shards hold this ledger's state,
// not another database's (redisstore.BindLedger). With record, what is not
// recorded yet is recorded as this process's.
func bind(ctx context.Context, cl *Clients, c config.Config, uses config.Daemon, record bool) error {
	shared := sharedSettings(c, uses)
	// Everything is compared before anything is recorded: a process
	// refused leaves no trace.
	if err := pgstore.CheckShared(ctx, cl.PG, "", shared, false); err != nil {
		return err
	}
	if err := pgstore.CheckShardsCover(ctx, cl.PG, cl.Shards); err != nil {
		return err
	}
	ledger, err := pgstore.LedgerID(ctx, cl.PG)
	if err != nil {
		return err
	}
	if err := redisstore.BindLedger(ctx, cl.Redis, redisstore.NewKeys(c.RedisKeyPrefix, cl.Shards), ledger, record); err != nil {
		return err
	}
	if !record {
		return nil
	}
	// Compared again as they are recorded: another process may have
	// recorded others meanwhile.
	return pgstore.CheckShared(ctx, cl.PG, recorder(), shared, true)
}

// sharedSettings are the settings every process of a ledger that uses
// them must share, as c has them: REDIS_KEY_PREFIX for everything that
// touches Redis; the grabbers' ID_TIME_ZONE (the days of order numbers,
// share codes and daily limits) and ORDER_NO_WIDTH. uses says whose
// settings: an operator command's are the flusher's (flusher export checks
// the time zone on its own).
func sharedSettings(c config.Config, uses config.Daemon) []pgstore.SharedSetting {
	out := []pgstore.SharedSetting{{Name: "redis_key_prefix", Env: "REDIS_KEY_PREFIX", Value: c.RedisKeyPrefix}}
	if uses&config.Grabber != 0 {
		out = append(out, TimeZoneSetting(c),
			pgstore.SharedSetting{Name: "order_no_width", Env: "ORDER_NO_WIDTH", Value: strconv.Itoa(c.OrderNoWidth)})
	}
	return out
}

// TimeZoneSetting is c's ID_TIME_ZONE as shared_settings holds it: the
// zone's name as given (two names of one zone, UTC and Etc/UTC, differ).
func TimeZoneSetting(c config.Config) pgstore.SharedSetting {
	zone := "UTC"
	if c.IDLocation != nil {
		zone = c.IDLocation.String()
	}
	return pgstore.SharedSetting{Name: "id_time_zone", Env: "ID_TIME_ZONE", Value: zone}
}

// recorder names this process in shared_settings: its program and host.
func recorder() string {
	host, err := os.Hostname()
	if err != nil {
		host = "an unknown host"
	}
	return fmt.Sprintf("%s on %s", filepath.Base(os.Args[0]), host)
}
