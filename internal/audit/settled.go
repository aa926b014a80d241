package audit

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/envelope"
	"redpacket/internal/redisstore"
)

// A settled envelope keeps its claims hash in Redis for SETTLED_KEY_TTL, so
// repeat grabs are answered from it. Settlement refunded what PostgreSQL did
// not hold as claimed, so each claim Redis still answers must be one
// PostgreSQL paid, and the other way round: a claim only Redis holds was
// answered to its user (and will be again, as a repeat) but refunded; one
// only PostgreSQL holds was lost by Redis. Either is a CheckRedisClaims
// violation.

// heldClaim is one user's claim of an envelope, as either side holds it.
type heldClaim struct {
	Packet  int64
	Amount  int64
	OrderNo string // "" when PostgreSQL holds none (applied without it)
}

// claimsScanCount is how many fields one HSCAN returns at most, so reading a
// big envelope's claims never holds Redis for long.
const claimsScanCount = 1000

// checkSettledClaims compares, for the settled envelopes of a page whose
// claims Redis still holds, those claims with PostgreSQL's. PostgreSQL is
// read after Redis: a settled envelope's claims no longer change on either
// side.
func checkSettledClaims(ctx context.Context, pool *pgxpool.Pool, rdb redis.UniversalClient, keys redisstore.Keys, rows []envelopeRow) (map[int64]Violation, error) {
	var settled []envelopeRow
	for _, r := range rows {
		if r.Status == envelope.StatusSettled {
			settled = append(settled, r)
		}
	}
	held, err := redisClaims(ctx, rdb, keys, settled)
	if err != nil || len(held) == 0 {
		return nil, err
	}
	ids := make([]int64, 0, len(held))
	for id := range held {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	paid, err := pgClaims(ctx, pool, ids)
	if err != nil {
		return nil, err
	}
	out := map[int64]Violation{}
	for _, id := range ids {
		if detail := compareClaims(held[id], paid[id]); detail != "" {
			out[id] = Violation{EnvelopeID: id, Check: CheckRedisClaims, Detail: detail}
		}
	}
	return out, nil
}

// redisClaims reads the claims hashes of the envelopes that still have
// some: the claim buckets, and the one hash of an envelope loaded before
// buckets.
func redisClaims(ctx context.Context, rdb redis.UniversalClient, keys redisstore.Keys, rows []envelopeRow) (map[int64]map[string]heldClaim, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	hashes := make([][]string, len(rows))
	pipe := rdb.Pipeline()
	lens := make([][]*redis.IntCmd, len(rows))
	for i, r := range rows {
		hashes[i] = append([]string{keys.Claims(r.ID)}, keys.ClaimBucketKeys(r.ID, int(r.Count))...)
		for _, h := range hashes[i] {
			lens[i] = append(lens[i], pipe.HLen(ctx, h))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, wrap("count the claims redis holds of settled envelopes", err)
	}
	out := map[int64]map[string]heldClaim{}
	for i, r := range rows {
		claims := map[string]heldClaim{}
		for j, h := range hashes[i] {
			if lens[i][j].Val() == 0 {
				continue // expired (SETTLED_KEY_TTL), forgotten or empty
			}
			if err := scanClaims(ctx, rdb, h, claims); err != nil {
				return nil, wrap(fmt.Sprintf("read the claims redis holds of envelope %d", r.ID), err)
			}
		}
		if len(claims) > 0 {
			out[r.ID] = claims
		}
	}
	return out, nil
}

// scanClaims adds the claims of one hash to claims.
func scanClaims(ctx context.Context, rdb redis.UniversalClient, hash string, claims map[string]heldClaim) error {
	var cursor uint64
	for {
		kv, next, err := rdb.HScan(ctx, hash, cursor, "", claimsScanCount).Result()
		if err != nil {
			return err
		}
		for j := 0; j+1 < len(kv); j += 2 {
			claims[kv[j]] = parseHeld(kv[j+1])
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// parseHeld reads a claim as Redis holds it; a claim that does not parse
// compares unequal to any PostgreSQL holds.
func parseHeld(raw string) heldClaim {
	c, err := redisstore.ParseClaim(raw)
	if err != nil {
		return heldClaim{Packet: -1}
	}
	return heldClaim{Packet: c.PacketID, Amount: c.AmountCents, OrderNo: c.OrderNo}
}

// pgClaims reads PostgreSQL's claims of the envelopes (SettledClaims).
func pgClaims(ctx context.Context, pool *pgxpool.Pool, ids []int64) (map[int64]map[string]heldClaim, error) {
	var rows []dbsqlc.SettledClaimsRow
	err := unbounded(ctx, pool, func(q *dbsqlc.Queries) (err error) {
		rows, err = q.SettledClaims(ctx, ids)
		return err
	})
	if err != nil {
		return nil, wrap("read the claims of settled envelopes", err)
	}
	out := map[int64]map[string]heldClaim{}
	for _, r := range rows {
		if out[r.EnvelopeID] == nil {
			out[r.EnvelopeID] = map[string]heldClaim{}
		}
		out[r.EnvelopeID][r.UserID] = heldClaim{Packet: r.PacketID, Amount: r.AmountCents, OrderNo: r.OrderNo}
	}
	return out, nil
}

// compareClaims describes how the claims Redis holds differ from those
// PostgreSQL paid, or returns "". An order number PostgreSQL does not hold
// (a claim applied without it) is not compared: that is a claim conflict,
// reported as such.
func compareClaims(redisHeld, pgPaid map[string]heldClaim) string {
	var onlyRedis, onlyPG, differ []string
	for user, r := range redisHeld {
		p, ok := pgPaid[user]
		switch {
		case !ok:
			onlyRedis = append(onlyRedis, fmt.Sprintf("%q packet %d", user, r.Packet))
		case r.Packet != p.Packet || r.Amount != p.Amount || p.OrderNo != "" && r.OrderNo != p.OrderNo:
			differ = append(differ, fmt.Sprintf("%q: redis packet %d (%d cents, order %s), postgres packet %d (%d cents, order %s)",
				user, r.Packet, r.Amount, r.OrderNo, p.Packet, p.Amount, p.OrderNo))
		}
	}
	for user, p := range pgPaid {
		if _, ok := redisHeld[user]; !ok {
			onlyPG = append(onlyPG, fmt.Sprintf("%q packet %d", user, p.Packet))
		}
	}
	if len(onlyRedis)+len(onlyPG)+len(differ) == 0 {
		return ""
	}
	var parts []string
	for _, g := range []struct {
		what  string
		users []string
	}{
		{"answered by redis, not paid by postgres (refunded)", onlyRedis},
		{"paid by postgres, unknown to redis", onlyPG},
		{"held differently", differ},
	} {
		if len(g.users) > 0 {
			slices.Sort(g.users)
			parts = append(parts, fmt.Sprintf("%d %s, e.g. %s", len(g.users), g.what, g.users[0]))
		}
	}
	return "settled, but its claims in redis and postgres differ: " + strings.Join(parts, "; ")
}
