package apikey

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/db/dbsqlc"
)

// Key is what a grabber knows of an active key.
type Key struct {
	Name   string // the key's name
	Client string // the client it belongs to: what requests are kept by
	Scopes Scopes
}

// keyset is the active keys as last read. It is replaced, never changed,
// when they change, but for seen.
type keyset struct {
	byHash map[Hash]*entry
	// seen maps the keys already checked, by their text, to their entry, so
	// that a key is hashed once per keyset rather than once per request. It
	// holds active keys only (an unknown key is never added), so it stays as
	// small as the table; a new map is swapped in to add one.
	seen   atomic.Pointer[map[string]*entry]
	seenMu sync.Mutex
}

func newKeyset(byHash map[Hash]*entry) *keyset {
	ks := &keyset{byHash: byHash}
	empty := map[string]*entry{}
	ks.seen.Store(&empty)
	return ks
}

// maxRemembered bounds seen: each key added copies the map, so past this
// many keys the rest are hashed on every request instead (a few hundred
// nanoseconds each).
const maxRemembered = 1024

// remember adds key to seen.
func (ks *keyset) remember(key string, e *entry) {
	ks.seenMu.Lock()
	defer ks.seenMu.Unlock()
	old := *ks.seen.Load()
	if len(old) >= maxRemembered {
		return
	}
	next := make(map[string]*entry, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[strings.Clone(key)] = e // not the request's memory
	ks.seen.Store(&next)
}

// entry is an active key in a Keyring.
type entry struct {
	Key
	hash Hash
	// usedAt is when the key was last accepted since last_used_at was
	// written (Unix milliseconds; 0: not since). Kept to the second, not
	// to the request: a write per second, not per request, on a line every
	// core reads.
	usedAt atomic.Int64
}

// Options tune a Keyring; the zero value takes the defaults.
type Options struct {
	// RefreshEvery is how often the active keys are read again: a key
	// revoked (or created) is seen within about that long. Default 1 s.
	RefreshEvery time.Duration
	// TouchEvery is how often last_used_at is written for the keys used
	// meanwhile. Default 1 min.
	TouchEvery time.Duration
	Log        *zap.Logger
}

// Keyring holds the active keys of PostgreSQL in memory and checks keys
// against them: a check reads no database, so neither a busy client nor one
// trying random keys adds a query. One loop (Run) reads every active key's
// hash, name, client and scopes again each RefreshEvery, one small query whatever the
// traffic, so a revoked key is refused by every grabber within about a
// second. (A cache per key with a time to live would ask PostgreSQL about
// every key it has not seen lately, random ones included, unless it also
// remembered unknown keys, which a client sending random keys can make grow
// without bound.) If PostgreSQL cannot be read, the keys last read stay in
// use, as grabs go on without PostgreSQL; revocations are then seen when it
// answers again.
type Keyring struct {
	q    *dbsqlc.Queries
	opts Options
	keys atomic.Pointer[keyset]
	done chan struct{}

	// Run's own: keys used but no longer active, whose use is still to be
	// written, and since when reading the keys fails.
	dropped      []*entry
	failingSince time.Time
}

// Open reads the active keys once; Run keeps them current.
func Open(ctx context.Context, db dbsqlc.DBTX, o Options) (*Keyring, error) {
	if o.RefreshEvery <= 0 {
		o.RefreshEvery = time.Second
	}
	if o.TouchEvery <= 0 {
		o.TouchEvery = time.Minute
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	k := &Keyring{q: dbsqlc.New(db), opts: o, done: make(chan struct{})}
	k.keys.Store(newKeyset(map[Hash]*entry{}))
	if err := k.refresh(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// Lookup returns the active key token is, if it is one. It reads memory
// only: a key checked before is one map read; another is checked for a
// key's shape and checksum, then hashed (SHA-256) and looked up by hash.
func (k *Keyring) Lookup(token string) (Key, bool) {
	ks := k.keys.Load()
	e, ok := (*ks.seen.Load())[token]
	if !ok {
		if !wellFormed(token) {
			return Key{}, false
		}
		if e, ok = ks.byHash[hashOf(token)]; !ok {
			return Key{}, false
		}
		ks.remember(token, e)
	}
	if now := time.Now().UnixMilli(); now-e.usedAt.Load() >= 1000 {
		e.usedAt.Store(now)
	}
	return e.Key, true
}

// Len is the number of active keys.
func (k *Keyring) Len() int { return len(k.keys.Load().byHash) }

// Run keeps the keys current and writes their last use, until ctx ends;
// then it writes the last use not yet written and returns nil (a failed
// read is retried, the keys read last staying in use).
func (k *Keyring) Run(ctx context.Context) error {
	defer close(k.done)
	refresh := time.NewTicker(k.opts.RefreshEvery)
	defer refresh.Stop()
	touch := time.NewTicker(k.opts.TouchEvery)
	defer touch.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			k.touch(final)
			cancel()
			return nil
		case <-refresh.C:
			k.refreshLogged(ctx)
		case <-touch.C:
			k.touch(ctx)
		}
	}
}

// Done is closed when Run has returned.
func (k *Keyring) Done() <-chan struct{} { return k.done }

// Flush writes the last uses not yet written, once Run has returned: a
// stopping grabber's Run ends at the signal, while its servers still answer
// the requests in hand, whose keys' uses only Flush then writes.
func (k *Keyring) Flush(ctx context.Context) error {
	select {
	case <-k.done:
	case <-ctx.Done():
		return fmt.Errorf("write the API keys' last use: %w", ctx.Err())
	}
	k.touch(ctx)
	return nil
}

func (k *Keyring) refreshLogged(ctx context.Context) {
	err := k.refresh(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
	case err != nil && k.failingSince.IsZero():
		k.failingSince = time.Now()
		k.opts.Log.Warn("cannot read the API keys; the keys read last stay in use (revocations wait)", zap.Error(err))
	case err == nil && !k.failingSince.IsZero():
		k.opts.Log.Info("API keys read again", zap.Duration("stale_for", time.Since(k.failingSince)),
			zap.Int("active", k.Len()))
		k.failingSince = time.Time{}
	}
}

// refresh reads the active keys and swaps them in. An entry that stays
// keeps its mark of use; one used and gone is kept for the next touch.
func (k *Keyring) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := k.q.ActiveAPIKeys(ctx)
	if err != nil {
		return fmt.Errorf("read the active API keys: %w", err)
	}
	old := k.keys.Load().byHash
	next := make(map[Hash]*entry, len(rows))
	same := len(rows) == len(old)
	for _, r := range rows {
		var h Hash
		if len(r.KeyHash) != len(h) {
			return fmt.Errorf("API key %q: a hash of %d bytes", r.Name, len(r.KeyHash))
		}
		copy(h[:], r.KeyHash)
		scopes, err := ScopesOf(r.Scopes)
		if err != nil {
			return fmt.Errorf("API key %q: %w", r.Name, err)
		}
		key := Key{Name: r.Name, Client: r.Client, Scopes: scopes}
		if e, ok := old[h]; ok && e.Key == key {
			next[h] = e
			continue
		}
		next[h] = &entry{Key: key, hash: h}
		same = false
	}
	if same {
		return nil // nothing changed: the keys already checked stay remembered
	}
	for h, e := range old {
		if next[h] != e && e.usedAt.Load() != 0 {
			k.dropped = append(k.dropped, e)
		}
	}
	k.keys.Store(newKeyset(next))
	return nil
}

// touch writes last_used_at of the keys used since the last touch, each
// the time of its last use (to within a second before it), not of the
// write. If the write fails they are written next time, with a later use
// if one came meanwhile.
func (k *Keyring) touch(ctx context.Context) {
	type use struct {
		e  *entry
		at int64
	}
	var used []use
	for _, e := range k.dropped {
		if at := e.usedAt.Swap(0); at != 0 {
			used = append(used, use{e, at})
		}
	}
	for _, e := range k.keys.Load().byHash {
		if at := e.usedAt.Swap(0); at != 0 {
			used = append(used, use{e, at})
		}
	}
	if len(used) == 0 {
		return
	}
	arg := dbsqlc.TouchAPIKeysParams{KeyHashes: make([][]byte, len(used)), UsedAts: make([]time.Time, len(used))}
	for i, u := range used {
		arg.KeyHashes[i], arg.UsedAts[i] = u.e.hash[:], time.UnixMilli(u.at)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := k.q.TouchAPIKeys(ctx, arg); err != nil {
		if ctx.Err() == nil {
			k.opts.Log.Warn("cannot record the API keys' last use; will retry", zap.Error(err))
		}
		var gone []*entry
		for _, u := range used {
			u.e.usedAt.CompareAndSwap(0, u.at) // a later use stays
			if k.keys.Load().byHash[u.e.hash] != u.e {
				gone = append(gone, u.e)
			}
		}
		k.dropped = gone
		return
	}
	k.dropped = nil
}
