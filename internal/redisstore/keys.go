package redisstore

import (
	"hash/fnv"
	"strconv"
)

// Keys builds every Redis key name of the service; no other file spells one.
//
// All keys of one shard share the hash tag {<prefix>:s<shard>}, so a script
// that touches an envelope's keys and its shard's queues runs on one Redis
// Cluster node:
//
//	{<prefix>:s<shard>}:e:<envelope>:meta    hash: status, expires, count, total, grabbed_cents,
//	                                         starts, password (digest), recipients (count),
//	                                         buckets, claimed; reloading, reloaded_claims
//	                                         while an operator's reload is under way
//	{<prefix>:s<shard>}:e:<envelope>:pool    list: packets not yet grabbed, "<packet>:<amount>"
//	{<prefix>:s<shard>}:e:<envelope>:staging:<token>  list: a loader's packets on their way
//	                                         to the pool (stage.lua), for 10 minutes at most
//	{<prefix>:s<shard>}:e:<envelope>:claims:<b>  hash, bucket b of the envelope's claims:
//	                                         user -> "<packet>:<amount>:<grabbed_ms>:<order_no>"
//	{<prefix>:s<shard>}:e:<envelope>:claims  hash: all claims of an envelope loaded before
//	                                         claims had buckets (meta without "buckets")
//	{<prefix>:s<shard>}:e:<envelope>:recipients  set: the users who may grab (only with recipients)
//	{<prefix>:s<shard>}:consumed             list: "<envelope>:<packet>:<amount>:<grabbed_ms>:<order_no>:<user>"
//	{<prefix>:s<shard>}:inflight             list: the batch the flusher is writing now
//	{<prefix>:s<shard>}:rejected             list: queued claims the flusher could not read
//	{<prefix>:s<shard>}:taken                string: when the flusher last took a batch waiting for replicas
//	{<prefix>:s<shard>}:epoch                string: token the flusher also keeps in PostgreSQL;
//	                                         gone or different means the shard lost its data
//	{<prefix>:s<shard>}:order:<yyyyMMdd>     hash: counter, ceiling, identity: the shard's order
//	                                         numbers of a day (grab.lua, order_ceiling.lua)
//
// Identifier generators share one more tag, {<prefix>:ids}:
//
//	{<prefix>:ids}:share:pool                string: 10000..99999 shuffled, 5 bytes each
//	{<prefix>:ids}:share:<yyMMdd>            counter: share codes taken on a day
//	{<prefix>:ids}:shortids                  bitmap: short user ids in use
//	{<prefix>:ids}:shortids:ready            flag: the bitmap holds every id in PostgreSQL
//
// A keyed create's mark is a script's only key, so it needs no tag (and the
// Idempotency-Key it holds may contain braces):
//
//	<prefix>:idem:<len(client)>:<client>:<key>  string: "<fingerprint hex>:<token>" of the
//	                                         create under way (create_mark.lua)
//
// The user and sender limits' keys are built below, each under a tag of
// its user's or sender's.
type Keys struct {
	prefix string
	shards int
}

// NewKeys returns the key builder for a prefix and a number of shards.
func NewKeys(prefix string, shards int) Keys { return Keys{prefix: prefix, shards: shards} }

// Shards is the number of shards envelopes are spread over.
func (k Keys) Shards() int { return k.shards }

// Shard is the shard of an envelope. It is a pure function of the id so the
// grab path needs no lookup; the number of shards must therefore stay fixed
// for the life of a deployment.
func (k Keys) Shard(envelopeID int64) int { return int(envelopeID % int64(k.shards)) }

func (k Keys) tag(shard int) string {
	return "{" + k.prefix + ":s" + strconv.Itoa(shard) + "}"
}

func (k Keys) envelope(envelopeID int64) string {
	return k.tag(k.Shard(envelopeID)) + ":e:" + strconv.FormatInt(envelopeID, 10)
}

// Meta is the envelope's meta hash; it is written last when loading, so its
// presence means the pool is complete.
func (k Keys) Meta(envelopeID int64) string { return k.envelope(envelopeID) + ":meta" }

// Pool is the list of the envelope's packets not yet grabbed.
func (k Keys) Pool(envelopeID int64) string { return k.envelope(envelopeID) + ":pool" }

// Staging is a list a loader of a large envelope fills, chunk by chunk,
// with the packets load.lua then makes the pool; token is the loader's own,
// so two loaders of one envelope never add to one list.
func (k Keys) Staging(envelopeID int64, token string) string {
	return k.envelope(envelopeID) + ":staging:" + token
}

// Claims is the single claims hash of an envelope loaded before claims had
// buckets (its meta has no "buckets"); such an envelope keeps it until it
// is settled or reloaded.
func (k Keys) Claims(envelopeID int64) string { return k.envelope(envelopeID) + ":claims" }

// An envelope's claims are spread over buckets, hashes of about
// claimsPerBucket users each, so each stays a listpack (Redis's compact
// encoding, hash-max-listpack-entries 128 by default): about 60 bytes a
// claim instead of 100 in one large hash. A bucket holds a user's claim
// whatever else the user does, so a repeat is answered from one small hash.
const claimsPerBucket = 64

// ClaimBuckets is the number of claim buckets of an envelope of count
// packets: a pure function of the count, which never changes, so every
// process and script agrees on it. Changing it changes where claims are
// found: it is part of the storage format, like BucketOf.
func ClaimBuckets(count int) int { return max(1, (count+claimsPerBucket-1)/claimsPerBucket) }

// BucketOf is the bucket, in [0, buckets), of a user's claim (FNV-1a).
func BucketOf(userID string, buckets int) int {
	if buckets <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(userID))
	return int(h.Sum32() % uint32(buckets))
}

// ClaimsBucket is bucket b of an envelope's claims hashes; with buckets 0
// (an envelope loaded before claims had buckets) the single hash, Claims.
func (k Keys) ClaimsBucket(envelopeID int64, buckets, b int) string {
	if buckets == 0 {
		return k.Claims(envelopeID)
	}
	return k.envelope(envelopeID) + ":claims:" + strconv.Itoa(b)
}

// GrabKeys are the keys of one grab of grab.lua: the envelope's meta and
// pool, the user's claims hash and the envelope's recipients, the same
// names as Meta, Pool, UserClaims and Recipients with the envelope's part
// built once (a grab's keys are most of its allocations).
func (k Keys) GrabKeys(envelopeID int64, buckets int, userID string) [4]string {
	e := k.envelope(envelopeID)
	claims := e + ":claims"
	if buckets > 0 {
		claims += ":" + strconv.Itoa(BucketOf(userID, buckets))
	}
	return [4]string{e + ":meta", e + ":pool", claims, e + ":recipients"}
}

// UserClaims is the claims hash that holds (or will hold) a user's claim.
func (k Keys) UserClaims(envelopeID int64, buckets int, userID string) string {
	return k.ClaimsBucket(envelopeID, buckets, BucketOf(userID, buckets))
}

// ClaimBucketKeys are all claim buckets of an envelope of count packets,
// for the scripts that create, expire or delete them.
func (k Keys) ClaimBucketKeys(envelopeID int64, count int) []string {
	n := ClaimBuckets(count)
	out := make([]string, n)
	for b := range out {
		out[b] = k.ClaimsBucket(envelopeID, n, b)
	}
	return out
}

// Recipients is the set of the users who may grab the envelope; it exists
// only for an envelope with recipients.
func (k Keys) Recipients(envelopeID int64) string { return k.envelope(envelopeID) + ":recipients" }

// Consumed is the shard's queue of claims waiting for the flusher.
func (k Keys) Consumed(shard int) string { return k.tag(shard) + ":consumed" }

// Inflight is the shard's list of claims the flusher is writing now.
func (k Keys) Inflight(shard int) string { return k.tag(shard) + ":inflight" }

// Rejected is the shard's list of queued claims the flusher could not read.
func (k Keys) Rejected(shard int) string { return k.tag(shard) + ":rejected" }

// Taken is written with every batch the flusher takes while it waits for
// replicas, so the wait covers the take even when it moved nothing.
func (k Keys) Taken(shard int) string { return k.tag(shard) + ":taken" }

// Epoch is the shard's token: the flusher keeps the same one in PostgreSQL,
// so a shard whose token vanished is known to have lost its data.
func (k Keys) Epoch(shard int) string { return k.tag(shard) + ":epoch" }

// Ledger names the ledger (PostgreSQL database) the shard's state belongs
// to: every process writes it or finds it there at start (BindLedger).
func (k Keys) Ledger(shard int) string { return k.tag(shard) + ":ledger" }

// Orders is the shard's order-number hash of a day (day as yyyyMMdd): it
// shares the shard's tag, so the grab script numbers its grants in the same
// call.
func (k Keys) Orders(shard int, day string) string { return k.tag(shard) + ":order:" + day }

func (k Keys) ids() string { return "{" + k.prefix + ":ids}" }

// SharePool is the shuffled pool of share-code suffixes.
func (k Keys) SharePool() string { return k.ids() + ":share:pool" }

// ShareDay is the counter of a day's share codes (day as yyMMdd).
func (k Keys) ShareDay(day string) string { return k.ids() + ":share:" + day }

// ShortIDs is the bitmap of short user ids in use.
func (k Keys) ShortIDs() string { return k.ids() + ":shortids" }

// ShortIDsReady marks the bitmap as complete (rebuilt from PostgreSQL if it
// was lost).
func (k Keys) ShortIDsReady() string { return k.ids() + ":shortids:ready" }

// user is the hash tag of a user's limit counters, for one client of the API
// ("" without API keys): one slot holds them all, so one script reads and
// writes them together whatever envelope is grabbed. The client's name is
// length-prefixed, so no client and user pair spells another's.
func (k Keys) user(client, userID string) string {
	return "{" + k.prefix + ":u:" + strconv.Itoa(len(client)) + ":" + client + ":" + userID + "}"
}

// UserGrabRate is the token bucket of a user's grabs (USER_GRAB_RATE).
func (k Keys) UserGrabRate(client, userID string) string { return k.user(client, userID) + ":rate" }

// UserDailyGrabs counts the packets a user received (or is being granted)
// on day yyyyMMdd (USER_DAILY_GRABS).
func (k Keys) UserDailyGrabs(client, userID, day string) string {
	return k.user(client, userID) + ":grabs:" + day
}

// SenderDailyCents counts the cents a sender put into envelopes on day
// yyyyMMdd (SENDER_DAILY_CENTS).
func (k Keys) SenderDailyCents(client, senderID, day string) string {
	return k.sender(client, senderID) + ":cents:" + day
}

// sender is the hash tag of a sender's keys, one slot per client and sender.
func (k Keys) sender(client, senderID string) string {
	return "{" + k.prefix + ":snd:" + strconv.Itoa(len(client)) + ":" + client + ":" + senderID + "}"
}

// SenderReservation holds the cents one create counted on its sender's day
// (SenderDailyCents), under a token of the create's own, so that giving them
// back gives back what that create counted and no more. It shares the
// counter's slot.
func (k Keys) SenderReservation(client, senderID, token string) string {
	return k.sender(client, senderID) + ":held:" + token
}

// CreateUnderWay marks a create with an Idempotency-Key as under way (for a
// client of the API, "" without API keys), so that a repeat sent before the
// first has written its key is told to wait rather than refused or made
// again. The client's name is length-prefixed, so no client and key pair
// spells another's; a key may hold braces, so it is no hash tag.
func (k Keys) CreateUnderWay(client, idemKey string) string {
	return k.prefix + ":idem:" + strconv.Itoa(len(client)) + ":" + client + ":" + idemKey
}
