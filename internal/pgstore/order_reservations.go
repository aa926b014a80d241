package pgstore

import (
	"context"
	"fmt"
	"strings"

	"redpacket/internal/db/dbsqlc"
)

// ReserveOrderNos reserves the next step counter values of a shard's order
// numbers of a day (date as yyyyMMdd): the range (old, new].
func (s *Store) ReserveOrderNos(ctx context.Context, date string, shard int, step int64) (old, new int64, err error) {
	if step < 1 || len(date) != len("20060102") || strings.Trim(date, "0123456789") != "" {
		return 0, 0, fmt.Errorf("reserve order numbers of shard %d on %q: step %d: want yyyyMMdd and a positive step", shard, date, step)
	}
	new, err = s.q.ReserveOrderNos(ctx, dbsqlc.ReserveOrderNosParams{Day: date, Shard: int32(shard), Step: step})
	if err != nil {
		return 0, 0, fmt.Errorf("reserve order numbers of shard %d on %s: %w", shard, date, err)
	}
	return new - step, new, nil
}
