package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// ErrEvictingPolicy is a Redis whose maxmemory-policy may evict keys: an
// evicted pool, claim queue or user set is state lost without a trace, so
// the daemons refuse to start on one.
var ErrEvictingPolicy = errors.New("redis maxmemory-policy evicts keys; set maxmemory-policy noeviction")

// RedisSettings are the settings a daemon reads of a Redis master at start.
type RedisSettings struct {
	Addr            string
	MaxmemoryPolicy string
	AppendOnly      string // yes, no
	AppendFsync     string // always, everysec, no
	Save            string // the snapshot schedule, "" for none
}

// Durability says what a crash of this master would lose, as the README's
// durability table does.
func (s RedisSettings) Durability() string {
	switch {
	case s.AppendOnly == "yes" && s.AppendFsync == "always":
		return "a crash loses nothing acknowledged (appendfsync always)"
	case s.AppendOnly == "yes" && s.AppendFsync == "everysec":
		return "a crash loses up to about a second of grabs not yet flushed (appendfsync everysec)"
	case s.AppendOnly == "yes":
		return "a crash loses the grabs the operating system had not yet written (appendfsync " + s.AppendFsync + ")"
	case s.Save != "":
		return "a crash loses the grabs not yet flushed since the last snapshot, and suspends the envelopes they belong to (RDB snapshots only)"
	}
	return "a crash loses every grab not yet flushed and every envelope's state: unfinished envelopes are suspended (no persistence)"
}

// CheckRedis reads each Redis master's eviction policy and persistence
// (every master of a cluster), refuses a policy that evicts
// (ErrEvictingPolicy), and logs what it found in one line per distinct set
// of settings, with waitReplicas (GRAB_WAIT_REPLICAS). A server that
// refuses CONFIG GET (managed Redis often disables or renames it) is logged
// as such and accepted: its settings are then the operator's to check. So
// is a cluster master that does not answer (a failover under way).
func CheckRedis(ctx context.Context, c redis.UniversalClient, log *zap.Logger, waitReplicas int) error {
	var (
		mu                 sync.Mutex
		found              []RedisSettings
		refused, unreached []string
		refusedE, unreachE error
	)
	cc, cluster := c.(*redis.ClusterClient)
	check := func(ctx context.Context, m *redis.Client) error {
		s, err := readSettings(ctx, m)
		var reply redis.Error
		mu.Lock()
		defer mu.Unlock()
		switch {
		case errors.As(err, &reply):
			refused, refusedE = append(refused, s.Addr), err
		case err != nil && cluster:
			// A master down now (its replica about to take over) must not
			// keep a daemon from serving the others' shards.
			unreached, unreachE = append(unreached, s.Addr), err
		case err != nil:
			return fmt.Errorf("read redis settings of %s: %w", s.Addr, err)
		default:
			found = append(found, s)
		}
		return nil
	}
	var err error
	if cluster {
		err = cc.ForEachMaster(ctx, check)
	} else if rc, ok := c.(*redis.Client); ok {
		err = check(ctx, rc)
	} else {
		return fmt.Errorf("read redis settings: unsupported client %T", c)
	}
	if err != nil {
		return err
	}
	if len(refused) > 0 {
		slices.Sort(refused)
		log.Warn("redis refused CONFIG GET: cannot check maxmemory-policy (must be noeviction) or persistence; going on",
			zap.Strings("masters", refused), zap.Error(refusedE), zap.Int("grab_wait_replicas", waitReplicas))
	}
	if len(unreached) > 0 {
		slices.Sort(unreached)
		log.Warn("redis masters did not answer CONFIG GET: their settings are unchecked; going on",
			zap.Strings("masters", unreached), zap.Error(unreachE))
	}
	for _, s := range found {
		if s.MaxmemoryPolicy != "noeviction" {
			return fmt.Errorf("%w: %s has %q", ErrEvictingPolicy, s.Addr, s.MaxmemoryPolicy)
		}
	}
	logSettings(log, found, waitReplicas)
	return nil
}

// readSettings reads a master's settings in one round trip, within
// masterCheckTimeout: a master that hangs delays a start by no more.
func readSettings(ctx context.Context, m *redis.Client) (RedisSettings, error) {
	s := RedisSettings{Addr: m.Options().Addr}
	ctx, cancel := context.WithTimeout(ctx, masterCheckTimeout)
	defer cancel()
	params := []struct {
		name string
		into *string
	}{
		{"maxmemory-policy", &s.MaxmemoryPolicy}, {"appendonly", &s.AppendOnly},
		{"appendfsync", &s.AppendFsync}, {"save", &s.Save},
	}
	cmds := make([]*redis.MapStringStringCmd, len(params))
	if _, err := m.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range params {
			cmds[i] = p.ConfigGet(ctx, q.name)
		}
		return nil
	}); err != nil {
		return s, err
	}
	for i, q := range params {
		*q.into = cmds[i].Val()[q.name]
	}
	return s, nil
}

// masterCheckTimeout bounds the reading of one master's settings.
const masterCheckTimeout = 5 * time.Second

// logSettings writes one line per distinct set of settings, naming the
// masters that have it: one line for a single server or a cluster set up
// alike.
func logSettings(log *zap.Logger, found []RedisSettings, waitReplicas int) {
	groups := map[RedisSettings][]string{}
	var order []RedisSettings
	for _, s := range found {
		key := s
		key.Addr = ""
		if groups[key] == nil {
			order = append(order, key)
		}
		groups[key] = append(groups[key], s.Addr)
	}
	for _, s := range order {
		addrs := groups[s]
		slices.Sort(addrs)
		log.Info("redis settings", zap.Strings("masters", addrs), zap.String("maxmemory_policy", s.MaxmemoryPolicy),
			zap.String("appendonly", s.AppendOnly), zap.String("appendfsync", s.AppendFsync), zap.String("save", s.Save),
			zap.Int("grab_wait_replicas", waitReplicas), zap.String("durability", s.Durability()))
	}
}
