package ids

import (
	_ "embed"

	rs "redpacket/internal/redisscript"
)

// The scripts and their reply codes: the one place where a code becomes an
// error. Each script's KEYS, ARGV and reply are documented at the top of its
// file, which declares the same codes by the same names
// (TestScriptsDeclareTheGoCodes).
var (
	//go:embed share.lua
	shareSource string
	//go:embed shortid_pick.lua
	pickSource string
	//go:embed shortid_ready.lua
	readySource string

	shareScript = rs.New("share.lua", shareSource,
		rs.Reply{Code: shareTaken, Name: "TAKEN"},
		rs.Reply{Code: shareUsedUp, Name: "USED_UP"},
		rs.Reply{Code: shareNoPool, Name: "NO_POOL"})
	pickScript = rs.New("shortid_pick.lua", pickSource,
		rs.Reply{Code: pickClaimed, Name: "CLAIMED"},
		rs.Reply{Code: pickFull, Name: "FULL"},
		rs.Reply{Code: pickRebuild, Name: "REBUILD"})
	readyScript = rs.New("shortid_ready.lua", readySource,
		rs.Reply{Code: readyDone, Name: "READY"})

	scripts = []*rs.Script{shareScript, pickScript, readyScript}
)

// Reply codes of share.lua.
const (
	shareTaken  rs.Code = 0
	shareUsedUp rs.Code = 1
	shareNoPool rs.Code = 2
)

// Reply codes of shortid_pick.lua and shortid_ready.lua.
const (
	pickClaimed rs.Code = 0
	pickFull    rs.Code = 1
	pickRebuild rs.Code = 2
	readyDone   rs.Code = 0
)
