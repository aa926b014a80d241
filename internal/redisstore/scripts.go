package redisstore

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Each script's KEYS, ARGV and reply are documented at the top of its file.
var (
	//go:embed grab.lua
	grabSource string
	//go:embed load.lua
	loadSource string
	//go:embed take.lua
	takeSource string

	grabScript = redis.NewScript(grabSource)
	loadScript = redis.NewScript(loadSource)
	takeScript = redis.NewScript(takeSource)
)

// Reply codes of grab.lua.
const (
	grabGranted   = 0
	grabRepeat    = 1
	grabNotLoaded = 2
	grabClosed    = 3
	grabSoldOut   = 4
)

// Reply codes of load.lua.
const (
	loadDone         = 1
	loadAlready      = 0
	loadInconsistent = -1
)
