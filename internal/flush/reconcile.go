package flush

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"redpacket/internal/envelope"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/telemetry"
)

// Reconcile compares every shard's epoch token in Redis with the one
// PostgreSQL recorded and returns the tokens now in force. A shard whose
// token is gone (or different) lost its data: each of its envelopes whose
// state may have lived only there is suspended before the shard gets a new
// token, so nothing is re-offered that may already have been granted.
//
// A shard that cannot be checked this round (its token unreadable, or its
// suspension failed) has "" in the result, and the error says why; the
// others' tokens are returned all the same, so that one unreachable Cluster
// master holds up only its own shards. The result is nil only when nothing
// could be checked.
func (f *Flusher) Reconcile(ctx context.Context) ([]string, error) {
	inRedis, err := f.redis.Epochs(ctx)
	var unread *redisstore.EpochsUnread
	if err != nil && !errors.As(err, &unread) {
		return nil, err
	}
	var errs []error
	if unread != nil {
		errs = append(errs, err)
	}
	recorded, err := f.pg.Epochs(ctx, len(inRedis))
	if err != nil {
		return nil, err
	}
	held := make(map[int]bool, len(f.shards))
	for _, s := range f.shards {
		held[s] = true
	}
	for shard, token := range inRedis {
		if token != "" && token == recorded[shard] || !held[shard] || unread.Unread(shard) {
			// Whole, another flusher's to check, or unreadable: an unread
			// token is no lost one, and stays "".
			continue
		}
		if recorded[shard] != "" {
			f.log.Error("redis shard lost its data; suspending its envelopes whose state lived there",
				zap.Int("shard", shard), zap.String("epoch_recorded", recorded[shard]),
				zap.String("epoch_in_redis", token))
			if err := f.suspendShard(ctx, shard); err != nil {
				errs = append(errs, err)
				inRedis[shard] = ""
				continue
			}
			token = ""
		}
		inRedis[shard], err = f.newEpoch(ctx, shard, recorded[shard], token)
		if errors.Is(err, pgstore.ErrWrongStatus) {
			// Another flusher recorded a new token first: it is checked
			// again next round.
			inRedis[shard] = ""
			continue
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := f.checkNewData(ctx, inRedis); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return inRedis, fmt.Errorf("reconcile shard epochs: %w", err)
	}
	return inRedis, nil
}

// checkNewData looks through the envelopes of every shard held whose Redis
// data is new to this flusher (a Redis restarted from an AOF or a snapshot,
// a replica promoted, or a flusher just started or given the shard): such
// data may be older than what Redis answered before while keeping its epoch
// token, and an envelope it holds behind PostgreSQL would grant packets
// already paid. Those are suspended (lossReason); a grant made before this
// check shows as a claim conflict once written, and suspends then.
// A shard whose epoch was not checked (""), or whose check failed, is
// checked again next round.
func (f *Flusher) checkNewData(ctx context.Context, epochs []string) error {
	ids, err := f.redis.Identities(ctx) // a shard unread is "", checked next round
	errs := []error{err}
	for _, shard := range f.shards {
		id := ids[shard]
		if epochs[shard] == "" || id == "" || f.dataChecked[shard] == id {
			continue
		}
		if err := f.suspendBehind(ctx, shard, false); err != nil {
			errs = append(errs, err)
			continue
		}
		f.dataChecked[shard] = id
	}
	return errors.Join(errs...)
}

// newEpoch records token for the shard (a fresh one when token is empty) in
// place of was in PostgreSQL, then in Redis. Stopped in between, the next
// round sees the two differ and goes through the shard again, which is
// harmless. The shard gets the ledger's name first (a shard that lost its
// data lost it too), or is found to hold another ledger's: then it gets no
// epoch, and the error says so every round.
func (f *Flusher) newEpoch(ctx context.Context, shard int, was, token string) (string, error) {
	ledger, err := f.pg.LedgerID(ctx)
	if err != nil {
		return "", err
	}
	if err := f.redis.BindShard(ctx, shard, ledger); err != nil {
		return "", err
	}
	if token == "" {
		token = rand.Text()
	}
	if err := f.pg.SetEpoch(ctx, shard, was, token); err != nil {
		return "", err
	}
	if err := f.redis.SetEpoch(ctx, shard, token); err != nil {
		return "", err
	}
	return token, nil
}

// suspendShard suspends the shard's envelopes that Redis no longer holds,
// or holds behind PostgreSQL (lossReason), after the shard lost its data.
// One whose meta exists was loaded after the loss (a loss takes the whole
// shard), so it is whole; one still loading without meta may or may not
// have been offered before, so it is suspended too.
func (f *Flusher) suspendShard(ctx context.Context, shard int) error {
	return f.suspendBehind(ctx, shard, true)
}

// suspendBehind suspends the shard's envelopes whose Redis state is lost or
// behind PostgreSQL's. Unless the shard's data is known lost, only an open
// envelope without meta counts as lost: one still loading is a create under
// way, and an expired one's keys may have lived out their time while its
// settlement waited (a flusher down for long).
func (f *Flusher) suspendBehind(ctx context.Context, shard int, lost bool) error {
	envs, err := f.pg.Unsettled(ctx, shard)
	if err != nil || len(envs) == 0 {
		return err
	}
	ids := make([]int64, len(envs))
	for i, e := range envs {
		ids[i] = e.ID
	}
	metas, err := f.redis.Metas(ctx, ids)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range envs {
		if _, loaded := metas[e.ID]; !lost && !loaded && e.Status != envelope.StatusOpen {
			continue
		}
		if reason := lossReason(e, metas); reason != "" {
			errs = append(errs, f.suspend(ctx, e.ID, reason))
		}
	}
	return errors.Join(errs...)
}

// lossReason tells why an envelope's Redis state cannot be trusted, or "".
// A suspended meta of an envelope PostgreSQL does not show suspended is a
// suspension that stopped half-way (Redis first, then PostgreSQL): its
// reason is lost with it, and it is finished rather than taken for whole.
func lossReason(e pgstore.Envelope, metas map[int64]redisstore.MetaState) string {
	m, ok := metas[e.ID]
	switch {
	case !ok && e.Status == envelope.StatusLoading:
		return "redis lost its data while the envelope was loading; it may have been offered"
	case !ok:
		return "redis holds no state for the envelope"
	case m.Status == redisstore.MetaSuspended && e.Status != envelope.StatusSuspended:
		return "redis holds the envelope suspended but postgres did not record it (a suspension cut short); see the logs before it"
	case m.GrabbedCents < e.ClaimedCents:
		return fmt.Sprintf("redis granted %d cents but postgres already holds %d: redis lost grabs", m.GrabbedCents, e.ClaimedCents)
	}
	return ""
}

// unsuspendFinal undoes a Redis suspension that PostgreSQL did not follow
// because the envelope is final (settled or failed meanwhile, as when a
// batch is written again after its envelope was settled): kept for good,
// the suspended keys would answer grabs 503 forever. They go, but for a
// forgotten meta (grabs are answered from PostgreSQL).
func (f *Flusher) unsuspendFinal(ctx context.Context, id int64) error {
	e, err := f.pg.Envelope(ctx, id)
	switch {
	case errors.Is(err, pgstore.ErrNotFound):
		return nil // a claim of an envelope PostgreSQL does not hold: its conflict is recorded
	case err != nil:
		return err
	case e.Status != envelope.StatusSettled && e.Status != envelope.StatusFailed:
		return nil // already suspended: an operator's to decide
	}
	return f.redis.Forget(ctx, id, e.Count, f.cfg.KeyTTL)
}

// suspend stops grants of an envelope in Redis, then records the suspension
// and why in PostgreSQL. Only an operator's recover undoes it.
func (f *Flusher) suspend(ctx context.Context, id int64, reason string) error {
	if _, err := f.redis.Suspend(ctx, id); err != nil {
		return err
	}
	changed, err := f.pg.Suspend(ctx, id, reason, f.now())
	if err != nil {
		return err
	}
	if !changed {
		return f.unsuspendFinal(ctx, id)
	}
	f.suspended.Add(1)
	telemetry.Suspended.Inc()
	f.log.Error("envelope suspended: grabs answer 503 until an operator recovers it",
		zap.Int64("envelope_id", id), zap.String("reason", reason),
		zap.String("next_step", fmt.Sprintf("flusher recover -envelope %d -action reload|refund -dry-run", id)))
	return nil
}
