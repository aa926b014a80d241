// Package retention sheds old settled envelopes from the ledger (`flusher
// retention`): it archives every row of each envelope settled (or failed,
// given up while loading) longer ago than the retention to files,
// PostgreSQL's COPY text format, then deletes those rows, a batch of
// envelopes per transaction.
//
// A batch's transaction locks its envelopes (FOR UPDATE, skipping those a
// concurrent run holds), writes their rows with COPY ... TO STDOUT, fsyncs
// the files and the manifest, deletes exactly the rows it wrote (REPEATABLE
// READ: the copies and the deletion read one snapshot, and a row changed
// meanwhile fails the transaction), compares the counts and cents deleted
// with those in the files, and only then commits. A failure before the
// commit deletes nothing and takes the files back to where they stood; a
// crash after the fsync leaves the rows in PostgreSQL and in the set, and the
// next run archives them again into a set of its own.
package retention

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/db/dbsqlc"
)

// Options say what a run removes and where it archives it.
type Options struct {
	OlderThan time.Duration // settled at least this long ago; must be positive
	Dir       string        // the archive directory; each run makes a set in it
	DryRun    bool          // only count what would be removed
	Limit     int           // most envelopes a run removes; 0: every one due
	Batch     int           // envelopes per transaction (default DefaultBatch)
	// DeliveredOnly keeps an envelope while one of its events waits for the
	// webhook receiver (set when WEBHOOK_URL is). A run does so as well when
	// the flushers recorded that they send webhooks (service_settings
	// webhooks): a run from cron may lack their settings.
	DeliveredOnly bool
	Now           func() time.Time // default time.Now

	failAt      map[string]int64 // tests: a table's file fails a write past this size
	afterCommit func()           // tests: called after each batch commits
}

// DefaultBatch is how many envelopes one transaction removes when
// Options.Batch is not set.
const DefaultBatch = 100

// maxAttempts is how often a batch is tried when PostgreSQL refuses it for
// a concurrent change (a serialization failure or a deadlock).
const maxAttempts = 3

// Totals are what a run removed (or, dry, would remove).
type Totals struct {
	Envelopes     int64
	TotalCents    int64 // the envelopes' totals
	ClaimedCents  int64 // of those, what users received
	RefundedCents int64 // and what went back to the senders
	Packets       int64
	Recipients    int64 // envelope_recipients rows (not counted by a dry run)
	Commitments   int64 // split_commitments rows (not counted by a dry run)
	Events        int64 // events: rows, and the claim events of runs (not counted by a dry run)
	Conflicts     int64 // claim_conflicts rows (not counted by a dry run)
}

// Result is the outcome of a run.
type Result struct {
	Cutoff  time.Time // envelopes settled before it were due
	Set     string    // the file set written; "" when nothing was removed (or a dry run)
	Removed Totals    // what was archived and deleted; a dry run's: what would be
	Batches int
	// Unbalanced are the envelopes left in place because their money does
	// not add up (ErrUnbalanced); the run went on past them.
	Unbalanced []int64
	// KeptUndelivered says the run kept envelopes whose events wait for the
	// webhook receiver (Options.DeliveredOnly, or the flushers' record).
	KeptUndelivered bool
}

var (
	errNotADirectory = errors.New("not a directory")
	errInjected      = errors.New("injected failure")
	// ErrMismatch means the rows a batch deleted differ from those it
	// archived; the batch was rolled back.
	ErrMismatch = errors.New("deleted rows differ from the archive")
	// ErrSchemaChanged means the database's schema version is not the one
	// the run's set was written under (a migration committed during the
	// run), or is dirty (a migration is running or failed half-way): the
	// batch was rolled back and the run stopped. The next run starts a set
	// of its own.
	ErrSchemaChanged = errors.New("the schema changed during the run or is being migrated")
	// ErrUnbalanced means an envelope's money does not add up (a claims row
	// without its packet, or claimed + refunded not the total): it stays,
	// with the evidence, until an operator mends it (flusher audit -all
	// says what is wrong). The run goes on past it and ends with this error,
	// naming it (Result.Unbalanced).
	ErrUnbalanced = errors.New("money does not add up")
	// ErrShorterThanEvents: the age asked for is below the EVENTS_RETENTION
	// the flushers recorded; nothing is removed.
	ErrShorterThanEvents = errors.New("refused: shorter than the flushers' events retention")
)

// Run removes what is due. An error after some batches committed leaves
// those removed (Result says what) and the rest in place.
func Run(ctx context.Context, pool *pgxpool.Pool, o Options) (Result, error) {
	if o.OlderThan <= 0 {
		return Result{}, fmt.Errorf("retention: the age must be positive, not %s", o.OlderThan)
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	started := now()
	q := dbsqlc.New(pool)
	recorded, err := q.WebhooksRecorded(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("retention: whether the flushers send webhooks: %w", err)
	}
	o.DeliveredOnly = o.DeliveredOnly || recorded
	// An envelope goes with its events: not before the flushers' own
	// EVENTS_RETENTION, which a run from cron may not have been given.
	secs, err := q.EventsRetentionRecorded(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("retention: the flushers' EVENTS_RETENTION: %w", err)
	}
	if kept := time.Duration(secs) * time.Second; o.OlderThan < kept {
		return Result{}, fmt.Errorf("%w: the flushers keep events for %s (their EVENTS_RETENTION), and removing "+
			"envelopes settled %s ago would delete events feed readers are promised", ErrShorterThanEvents, kept, o.OlderThan)
	}
	r := &run{pool: pool, o: o, cutoff: started.Add(-o.OlderThan), started: started}
	r.res.KeptUndelivered = o.DeliveredOnly
	if o.DryRun {
		return r.dry(ctx)
	}
	if o.Dir == "" {
		return Result{}, errors.New("retention: no archive directory")
	}
	if err := CheckDir(o.Dir); err != nil {
		return Result{}, err
	}
	err = r.loop(ctx)
	if len(r.res.Unbalanced) > 0 {
		err = errors.Join(err, fmt.Errorf("%w: envelopes %v left in place (flusher audit -all says why)",
			ErrUnbalanced, r.res.Unbalanced))
	}
	if r.set != nil {
		r.set.manifest.Complete = err == nil
		err = errors.Join(err, r.finishSet())
	}
	r.res.Cutoff = r.cutoff
	return r.res, err
}

// finishSet writes the set's manifest and closes it; a set whose files hold
// nothing (its only batches rolled back) is removed instead, so that runs
// that find nothing to remove leave nothing behind.
func (r *run) finishSet() error {
	s := r.set
	if s.empty() {
		s.close()
		if err := os.RemoveAll(s.dir); err != nil {
			return fmt.Errorf("remove the empty archive set: %w", err)
		}
		return nil
	}
	err := s.writeManifest()
	s.close()
	r.res.Set = s.dir
	return err
}

type run struct {
	pool    *pgxpool.Pool
	o       Options
	cutoff  time.Time
	started time.Time
	set     *set
	res     Result
}

func (r *run) dry(ctx context.Context) (Result, error) {
	due, err := dbsqlc.New(r.pool).RetentionDue(ctx, dbsqlc.RetentionDueParams{
		Cutoff: r.cutoff, Now: r.started, DeliveredOnly: r.o.DeliveredOnly, MaxRows: r.limit(),
	})
	if err != nil {
		return Result{}, fmt.Errorf("count the envelopes settled before %s: %w", r.cutoff.UTC().Format(time.RFC3339), err)
	}
	return Result{Cutoff: r.cutoff, KeptUndelivered: r.o.DeliveredOnly, Removed: Totals{Envelopes: due.Envelopes,
		TotalCents: due.TotalCents, ClaimedCents: due.ClaimedCents, RefundedCents: due.RefundedCents, Packets: due.Packets}}, nil
}

// limit is the run's limit as a row count.
func (r *run) limit() int32 {
	if r.o.Limit <= 0 || r.o.Limit > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(r.o.Limit)
}

// loop removes batch after batch, oldest settlement first, until none is
// due or the limit is reached.
func (r *run) loop(ctx context.Context) error {
	k := key{}
	// single counts the envelopes still to take one at a time after a batch
	// that did not add up, to find which of them did not.
	single := int64(0)
	for left := int64(r.limit()); left > 0; {
		n := min(int64(r.o.Batch), left)
		if single > 0 {
			n = 1
		}
		var got int
		var next key
		var err error
		for attempt := 1; ; attempt++ {
			got, next, err = r.batch(ctx, k, int32(n))
			if err == nil || attempt == maxAttempts || !retryable(err) {
				break
			}
		}
		var ub *unbalancedBatch
		switch {
		case errors.As(err, &ub) && len(ub.ids) > 1:
			single = int64(len(ub.ids))
			continue
		case errors.As(err, &ub):
			r.res.Unbalanced = append(r.res.Unbalanced, ub.ids...)
			single--
			continue
		case err != nil:
			return err
		case got == 0:
			return nil
		}
		k, left, single = next, left-int64(got), max(0, single-int64(got))
	}
	return nil
}

// unbalancedBatch is a batch rolled back for ErrUnbalanced, with its
// envelopes.
type unbalancedBatch struct {
	ids []int64
	err error
}

func (e *unbalancedBatch) Error() string { return e.err.Error() }
func (e *unbalancedBatch) Unwrap() error { return e.err }

// key is where a run stands: the settlement of the last envelope it
// locked. Envelopes settled at the same instant are looked at again, and
// those removed are gone.
type key struct {
	at time.Time
}

// batch removes up to n envelopes after k in one transaction, and returns
// how many and the key of the last.
func (r *run) batch(ctx context.Context, k key, n int32) (int, key, error) {
	tx, err := r.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return 0, k, wrapErr("begin a retention batch", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after a commit it does nothing
	if err := dbsqlc.New(tx).LocalNoStatementTimeout(ctx); err != nil {
		return 0, k, wrapErr("begin a retention batch", err)
	}
	var mark *setMark
	locked, removed, err := r.remove(ctx, tx, k, n, &mark)
	if err != nil {
		var setErr error
		if mark != nil {
			// Nothing was deleted: the set goes back to where it stood.
			setErr = errors.Join(r.set.undo(*mark), r.set.writeManifest())
		}
		if errors.Is(err, ErrUnbalanced) && setErr == nil {
			// Only a set that went back whole lets the run go on past it.
			ids := make([]int64, len(locked))
			for i, l := range locked {
				ids[i] = l.ID
			}
			return 0, k, &unbalancedBatch{ids: ids, err: err}
		}
		return 0, k, errors.Join(err, setErr)
	}
	if len(locked) == 0 {
		return 0, k, nil
	}
	// A commit that fails may still have happened: the files stay, and a
	// later run archives again whatever is still there.
	if err := tx.Commit(ctx); err != nil {
		return 0, k, wrapErr("commit a retention batch", err)
	}
	r.add(removed)
	if r.o.afterCommit != nil {
		r.o.afterCommit()
	}
	return len(locked), key{at: locked[len(locked)-1].SettledAt}, nil
}

// remove locks up to n envelopes after k, archives their rows and deletes
// them, in tx; *mark is set once the set's files may have changed.
func (r *run) remove(ctx context.Context, tx pgx.Tx, k key, n int32, mark **setMark) (
	[]dbsqlc.RetentionLockBatchRow, dbsqlc.RetentionDeleteRow, error) {
	q := dbsqlc.New(tx)
	var removed dbsqlc.RetentionDeleteRow
	locked, err := q.RetentionLockBatch(ctx, dbsqlc.RetentionLockBatchParams{Cutoff: r.cutoff, AfterAt: k.at,
		SkipIds: r.res.Unbalanced, Now: r.started,
		DeliveredOnly: r.o.DeliveredOnly, MaxRows: n})
	if err != nil || len(locked) == 0 {
		return nil, removed, wrapErr("lock the envelopes due", err)
	}
	// The schema the rows are copied under, read in this transaction's
	// snapshot: the set's first batch names it, and every later one must
	// find it unchanged.
	version, err := schemaVersion(ctx, q)
	if err != nil {
		return nil, removed, err
	}
	if r.set == nil {
		var cols map[string][]string
		if cols, err = readColumns(ctx, q); err != nil {
			return nil, removed, err
		}
		if r.set, err = newSet(r.o.Dir, r.started, version, tables, cols, r.o.failAt); err != nil {
			return nil, removed, err
		}
		r.set.manifest.SettledBefore = r.cutoff.UTC()
	} else if was := r.set.manifest.SchemaVersion; version != was {
		return nil, removed, fmt.Errorf("%w: the set was written under migration %d, the database is at %d",
			ErrSchemaChanged, was, version)
	}
	m := r.set.mark()
	*mark = &m
	ids := make([]int64, len(locked))
	for i, l := range locked {
		ids[i] = l.ID
	}
	if err := r.archive(ctx, tx, q, ids); err != nil {
		return nil, removed, err
	}
	removed, err = q.RetentionDelete(ctx, dbsqlc.RetentionDeleteParams{EnvelopeIds: ids, Cutoff: r.cutoff})
	if err != nil {
		return nil, removed, wrapErr("delete the archived rows", err)
	}
	return locked, removed, r.set.check(m, removed, len(ids))
}

// archive writes the rows of the envelopes ids to the set's files and makes
// them and the manifest durable.
func (r *run) archive(ctx context.Context, tx pgx.Tx, q *dbsqlc.Queries, ids []int64) error {
	if err := q.RetentionSetBatch(ctx, ids); err != nil {
		return wrapErr("name the batch", err)
	}
	conn := tx.Conn().PgConn()
	for _, f := range r.set.files {
		_, err := conn.CopyTo(ctx, f, f.spec.copy)
		if err = errors.Join(err, f.failed()); err != nil {
			return fmt.Errorf("archive %s: %w", f.spec.name, err)
		}
	}
	if err := r.set.sync(); err != nil {
		return err
	}
	r.set.manifest.Envelopes += int64(len(ids))
	r.set.manifest.Batches++
	return r.set.writeManifest()
}

func (r *run) add(d dbsqlc.RetentionDeleteRow) {
	t := &r.res.Removed
	t.Envelopes += d.Envelopes
	t.TotalCents += d.TotalCents
	t.ClaimedCents += d.ClaimedCents
	t.RefundedCents += d.RefundedCents
	t.Packets += d.Packets
	t.Recipients += d.Recipients
	t.Commitments += d.Commitments
	t.Events += d.Events
	t.Conflicts += d.Conflicts
	r.res.Batches++
}

// schemaVersion is the migration the database is at, as golang-migrate
// records it in schema_migrations.
func schemaVersion(ctx context.Context, q *dbsqlc.Queries) (int, error) {
	v, err := q.SchemaVersion(ctx)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// golang-migrate rewrites its row with TRUNCATE, which a snapshot
		// taken before it sees as an empty table.
		return 0, fmt.Errorf("%w: schema_migrations is empty (a migration is recording its version)", ErrSchemaChanged)
	case err != nil:
		return 0, wrapErr("read the schema version", err)
	case v.Dirty:
		return 0, fmt.Errorf("%w: migration %d is dirty (running, or failed half-way)", ErrSchemaChanged, v.Version)
	}
	return int(v.Version), nil
}

func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// retryable reports PostgreSQL refusing a transaction for a concurrent one:
// serialization_failure (a row of the snapshot changed) or deadlock_detected.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == pgerrcode.SerializationFailure || pgErr.Code == pgerrcode.DeadlockDetected)
}
