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
	//go:embed ack.lua
	ackSource string
	//go:embed close.lua
	closeSource string
	//go:embed fail.lua
	failSource string
	//go:embed reload.lua
	reloadSource string

	grabScript   = redis.NewScript(grabSource)
	loadScript   = redis.NewScript(loadSource)
	takeScript   = redis.NewScript(takeSource)
	ackScript    = redis.NewScript(ackSource)
	closeScript  = redis.NewScript(closeSource)
	failScript   = redis.NewScript(failSource)
	reloadScript = redis.NewScript(reloadSource)
)

// Reply codes of grab.lua.
const (
	grabGranted   = 0
	grabRepeat    = 1
	grabNotLoaded = 2
	grabClosed    = 3
	grabSoldOut   = 4
	grabSuspended = 5
)

// Reply codes of load.lua.
const (
	loadDone         = 1
	loadAlready      = 0
	loadInconsistent = -1
	loadEpochChanged = -2
	loadGivenUp      = -3
)

// Reply codes of fail.lua.
const (
	failDone         = 1
	failWasLoaded    = 0
	failInconsistent = -1
	failEpochChanged = -2
)
