package redisstore

import (
	_ "embed"

	rs "redpacket/internal/redisscript"
)

// The scripts and their reply codes: the one place where a code becomes an
// error. Each script's KEYS, ARGV and reply are documented at the top of its
// file, which declares the same codes by the same names
// (TestScriptsDeclareTheGoCodes).
var (
	//go:embed grab.lua
	grabSource string
	//go:embed order_ceiling.lua
	ceilingSource string
	//go:embed load.lua
	loadSource string
	//go:embed stage.lua
	stageSource string
	//go:embed take.lua
	takeSource string
	//go:embed ack.lua
	ackSource string
	//go:embed close.lua
	closeSource string
	//go:embed fail.lua
	failSource string
	//go:embed reload_begin.lua
	reloadBeginSource string
	//go:embed reload_claims.lua
	reloadClaimsSource string
	//go:embed reload.lua
	reloadSource string
	//go:embed create_mark.lua
	createMarkSource string
	//go:embed create_unmark.lua
	createUnmarkSource string

	grabScript = rs.New("grab.lua", grabSource,
		rs.Reply{Code: grabDone, Name: "DONE"},
		rs.Reply{Code: grabFence, Name: "FENCE"},
		rs.Reply{Code: grabCeiling, Name: "CEILING"},
		rs.Reply{Code: grabExhausted, Name: "EXHAUSTED"})
	ceilingScript = rs.New("order_ceiling.lua", ceilingSource,
		rs.Reply{Code: ceilingRaised, Name: "RAISED"},
		rs.Reply{Code: ceilingFence, Name: "FENCE"})
	loadScript = rs.New("load.lua", loadSource,
		rs.Reply{Code: loadLoaded, Name: "LOADED"},
		rs.Reply{Code: loadAlready, Name: "ALREADY"},
		rs.Reply{Code: loadInconsistent, Name: "INCONSISTENT", Err: ErrInconsistent},
		rs.Reply{Code: loadEpochChanged, Name: "EPOCH_CHANGED", Err: ErrEpochChanged},
		rs.Reply{Code: loadGivenUp, Name: "GIVEN_UP", Err: ErrGivenUp},
		rs.Reply{Code: loadUnstaged, Name: "UNSTAGED", Err: ErrUnstaged},
		rs.Reply{Code: loadOther, Name: "OTHER", Err: ErrOtherEnvelope})
	stageScript = rs.New("stage.lua", stageSource,
		rs.Reply{Code: stageStaged, Name: "STAGED"},
		rs.Reply{Code: stageOutOfStep, Name: "OUT_OF_STEP", Err: ErrUnstaged})
	takeScript = rs.New("take.lua", takeSource,
		rs.Reply{Code: takeTaken, Name: "TAKEN"})
	ackScript = rs.New("ack.lua", ackSource,
		rs.Reply{Code: ackDropped, Name: "DROPPED"},
		rs.Reply{Code: ackOther, Name: "OTHER"})
	closeScript = rs.New("close.lua", closeSource,
		rs.Reply{Code: closeNoMeta, Name: "NO_META"},
		rs.Reply{Code: closeFound, Name: "FOUND"})
	failScript = rs.New("fail.lua", failSource,
		rs.Reply{Code: failFailed, Name: "FAILED"},
		rs.Reply{Code: failWasLoaded, Name: "WAS_LOADED"},
		rs.Reply{Code: failInconsistent, Name: "INCONSISTENT", Err: ErrInconsistent},
		rs.Reply{Code: failEpochChanged, Name: "EPOCH_CHANGED", Err: ErrEpochChanged},
		rs.Reply{Code: failSuspended, Name: "SUSPENDED", Err: ErrSuspended},
		rs.Reply{Code: failOther, Name: "OTHER", Err: ErrOtherEnvelope})
	reloadBeginScript = rs.New("reload_begin.lua", reloadBeginSource,
		rs.Reply{Code: reloadBegun, Name: "BEGUN"},
		rs.Reply{Code: reloadBeginNotSuspended, Name: "NOT_SUSPENDED", Err: ErrNotSuspended})
	reloadClaimsScript = rs.New("reload_claims.lua", reloadClaimsSource,
		rs.Reply{Code: reloadWritten, Name: "WRITTEN"},
		rs.Reply{Code: reloadNotReloading, Name: "NOT_RELOADING", Err: ErrNotSuspended})
	reloadScript = rs.New("reload.lua", reloadSource,
		rs.Reply{Code: reloadDone, Name: "RELOADED"},
		rs.Reply{Code: reloadNotSuspended, Name: "NOT_SUSPENDED", Err: ErrNotSuspended},
		rs.Reply{Code: reloadUnstaged, Name: "UNSTAGED", Err: ErrUnstaged})

	createMarkScript = rs.New("create_mark.lua", createMarkSource,
		rs.Reply{Code: createMarked, Name: "MARKED"},
		rs.Reply{Code: createUnderWay, Name: "UNDER_WAY", Err: ErrCreateUnderWay},
		rs.Reply{Code: createOtherBody, Name: "OTHER_BODY", Err: ErrCreateOtherBody})
	createUnmarkScript = rs.New("create_unmark.lua", createUnmarkSource,
		rs.Reply{Code: createEnded, Name: "ENDED"},
		rs.Reply{Code: createNotOurs, Name: "NOT_OURS"})

	// scripts is every script of the package, for the checks.
	scripts = []*rs.Script{grabScript, ceilingScript, loadScript, stageScript, takeScript, ackScript, closeScript, failScript,
		reloadBeginScript, reloadClaimsScript, reloadScript,
		createMarkScript, createUnmarkScript}
)

// grabOutcomes are the codes of each grab inside grab.lua's payload, with
// the error each refusal is. AWAITING's error depends on the call's code
// (see coalesce.go: callOutcome).
var grabOutcomes = []rs.Reply{
	{Code: grabGranted, Name: "GRANTED"},
	{Code: grabRepeat, Name: "REPEAT"},
	{Code: grabNotLoaded, Name: "NOT_LOADED", Err: ErrNotLoaded},
	{Code: grabClosed, Name: "CLOSED", Err: ErrClosed},
	{Code: grabSoldOut, Name: "SOLD_OUT", Err: ErrSoldOut},
	{Code: grabSuspended, Name: "SUSPENDED", Err: ErrSuspended},
	{Code: grabAwaiting, Name: "AWAITING"},
	{Code: grabBadState, Name: "BAD_STATE", Err: ErrBadState},
	{Code: grabNotStarted, Name: "NOT_STARTED", Err: ErrNotStarted},
	{Code: grabNotRecipient, Name: "NOT_RECIPIENT", Err: ErrNotRecipient},
	{Code: grabWrongPassword, Name: "WRONG_PASSWORD", Err: ErrWrongPassword},
	{Code: grabStale, Name: "STALE", Err: errStaleBuckets},
	{Code: grabUnreserved, Name: "UNRESERVED", Err: ErrUnreserved},
}

// Reply codes of grab.lua, per call.
const (
	grabDone      rs.Code = 0
	grabFence     rs.Code = 1
	grabCeiling   rs.Code = 2
	grabExhausted rs.Code = 3
)

// Codes of each grab in grab.lua's payload.
const (
	grabGranted   rs.Code = 0
	grabRepeat    rs.Code = 1
	grabNotLoaded rs.Code = 2
	grabClosed    rs.Code = 3
	grabSoldOut   rs.Code = 4
	grabSuspended rs.Code = 5
	grabAwaiting  rs.Code = 6
	grabBadState  rs.Code = 7

	// The gates: refusals that take nothing.
	grabNotStarted    rs.Code = 8
	grabNotRecipient  rs.Code = 9
	grabWrongPassword rs.Code = 10

	// The caller named the envelope's claims by another number of buckets
	// than its meta records: nothing was read or taken; ask again with the
	// meta's number.
	grabStale rs.Code = 11

	// A grab without a reservation of the user's limits would have taken a
	// packet: nothing was taken (GrabUnreserved).
	grabUnreserved rs.Code = 12
)

// Reply codes of order_ceiling.lua.
const (
	ceilingRaised rs.Code = 0
	ceilingFence  rs.Code = 1
)

// Reply codes of load.lua.
const (
	loadLoaded       rs.Code = 0
	loadAlready      rs.Code = 1
	loadInconsistent rs.Code = 2
	loadEpochChanged rs.Code = 3
	loadGivenUp      rs.Code = 4
	loadUnstaged     rs.Code = 5
	loadOther        rs.Code = 6
)

// Reply codes of stage.lua.
const (
	stageStaged    rs.Code = 0
	stageOutOfStep rs.Code = 1
)

// Reply codes of take.lua, ack.lua and close.lua.
const (
	takeTaken   rs.Code = 0
	ackDropped  rs.Code = 0
	ackOther    rs.Code = 1
	closeNoMeta rs.Code = 0
	closeFound  rs.Code = 1
)

// Reply codes of create_mark.lua and create_unmark.lua.
const (
	createMarked    rs.Code = 0
	createUnderWay  rs.Code = 1
	createOtherBody rs.Code = 2
	createEnded     rs.Code = 0
	createNotOurs   rs.Code = 1
)

// Reply codes of fail.lua.
const (
	failFailed       rs.Code = 0
	failWasLoaded    rs.Code = 1
	failInconsistent rs.Code = 2
	failEpochChanged rs.Code = 3
	failSuspended    rs.Code = 4
	failOther        rs.Code = 5
)

// Reply codes of reload_begin.lua, reload_claims.lua and reload.lua.
const (
	reloadBegun             rs.Code = 0
	reloadBeginNotSuspended rs.Code = 1

	reloadWritten      rs.Code = 0
	reloadNotReloading rs.Code = 1

	reloadDone         rs.Code = 0
	reloadNotSuspended rs.Code = 1
	reloadUnstaged     rs.Code = 2
)

// MetaStatus is the status field of an envelope's meta hash, as the scripts
// write and compare it.
type MetaStatus string

// Meta statuses: "open" is set by loading, the others by the flusher.
const (
	MetaOpen      MetaStatus = "open"
	MetaClosed    MetaStatus = "closed"
	MetaSuspended MetaStatus = "suspended"
	MetaFailed    MetaStatus = "failed"
	// MetaForgotten is all that is left of an envelope an operator
	// refunded (Forget): grabs are answered from PostgreSQL as if Redis
	// held nothing, but a creator's late load finds it and loads nothing.
	MetaForgotten MetaStatus = "forgotten"
)

// metaStatuses lists them all, for the checks.
var metaStatuses = []MetaStatus{MetaOpen, MetaClosed, MetaSuspended, MetaFailed, MetaForgotten}

// Field names of the hashes the scripts read and write: an envelope's meta
// and a shard's order numbers of a day.
const (
	fieldStatus       = "status"
	fieldExpires      = "expires"
	fieldCount        = "count"
	fieldTotal        = "total"
	fieldGrabbedCents = "grabbed_cents"
	fieldStarts       = "starts"
	fieldPassword     = "password"
	fieldRecipients   = "recipients"
	fieldBuckets      = "buckets"         // claim buckets (ClaimBuckets); absent: the one claims hash
	fieldClaimed      = "claimed"         // claims in the buckets (the one hash is counted by HLEN)
	fieldReloading    = "reloading"       // an operator's reload under way: its token (reload_begin.lua)
	fieldReloaded     = "reloaded_claims" // the claims that reload has written so far
	fieldCounter      = "counter"
	fieldCeiling      = "ceiling"
	fieldIdentity     = "identity"
)

// ScriptWords are the words a script over these keys may quote besides
// Redis commands: every one a constant above (redisscript.Script.Check).
func ScriptWords() []string {
	words := []string{fieldStatus, fieldExpires, fieldCount, fieldTotal, fieldGrabbedCents,
		fieldStarts, fieldPassword, fieldRecipients, fieldBuckets, fieldClaimed,
		fieldReloading, fieldReloaded, fieldCounter, fieldCeiling, fieldIdentity}
	for _, s := range metaStatuses {
		words = append(words, string(s))
	}
	return words
}
