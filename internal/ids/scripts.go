package ids

import (
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Each script's KEYS, ARGV and reply are documented at the top of its file.
var (
	//go:embed share.lua
	shareSource string
	//go:embed order.lua
	orderSource string
	//go:embed shortid_pick.lua
	pickSource string
	//go:embed shortid_ready.lua
	readySource string

	shareScript = redis.NewScript(shareSource)
	orderScript = redis.NewScript(orderSource)
	pickScript  = redis.NewScript(pickSource)
	readyScript = redis.NewScript(readySource)
)

// Reply codes of share.lua.
const (
	shareTaken  = 0
	shareUsedUp = 1
	shareNoPool = 2
)

// Reply codes of shortid_pick.lua.
const (
	pickClaimed = 0
	pickFull    = 1
	pickRebuild = 2
)

// reply splits a script's {code[, value]} reply.
func reply(v any) (code int64, value any, err error) {
	r, ok := v.([]any)
	if !ok || len(r) == 0 {
		return 0, nil, fmt.Errorf("unexpected script reply %#v", v)
	}
	if code, ok = r[0].(int64); !ok {
		return 0, nil, fmt.Errorf("unexpected script reply code %#v", r[0])
	}
	if len(r) > 1 {
		value = r[1]
	}
	return code, value, nil
}
