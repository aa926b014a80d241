package retention

import (
	"context"
	"fmt"
	"time"

	"redpacket/internal/db/dbsqlc"
)

// sum is a money column a file adds up: column over every row, or only over
// the rows whose notNull column is not NULL.
type sum struct{ name, column, notNull string }

// table is a table holding rows of envelopes, and the statement that
// archives them.
type table struct {
	name string
	copy string // a RetentionCopy statement of the query layer
	sums []sum
	// holds names the tables whose rows the file holds when name is a
	// view over them (a DBA loads the file back into the view, COPY packets
	// FROM ..., whose trigger writes them), or when other tables' rows are
	// written in its shape (claim_event_runs' events as events rows).
	holds []string
}

func (t table) file() string { return t.name + ".tsv" }

// tables are every table keyed by an envelope id whose rows go with the
// envelope, in the order a DBA loads them back (envelopes first: others
// refer to them). idempotency_keys is not one of them: a key expires on its
// own (IDEMPOTENCY_TTL), and until then a repeated create must still find it.
var tables = []table{
	{"envelopes", dbsqlc.RetentionCopyEnvelopes, []sum{
		{"total_cents", "total_cents", ""}, {"claimed_cents", "claimed_cents", ""}, {"refunded_cents", "refunded_cents", ""}}, nil},
	{"packets", dbsqlc.RetentionCopyPackets, []sum{
		{"amount_cents", "amount_cents", ""}, {"claimed_cents", "amount_cents", "claimed_by"},
		{"refunded_cents", "amount_cents", "refunded_at"}}, []string{"packet_pool", "claims"}},
	{"envelope_recipients", dbsqlc.RetentionCopyRecipients, nil, nil},
	{"split_commitments", dbsqlc.RetentionCopyCommitments, nil, nil},
	{"events", dbsqlc.RetentionCopyEvents, nil, []string{"events", "claim_event_runs"}},
	{"claim_conflicts", dbsqlc.RetentionCopyConflicts, nil, nil},
}

// readColumns reads each table's columns in the order COPY writes them.
// The run reads them in the transaction of its first batch, with the schema
// version.
func readColumns(ctx context.Context, q *dbsqlc.Queries) (map[string][]string, error) {
	out := map[string][]string{}
	for _, t := range tables {
		cols, err := q.RetentionColumns(ctx, t.name)
		if err != nil {
			return nil, fmt.Errorf("read the columns of %s: %w", t.name, err)
		}
		out[t.name] = cols
	}
	return out, nil
}

// Manifest describes a set (manifest.json).
type Manifest struct {
	Format        string    `json:"format"`
	SchemaVersion int       `json:"schema_version"`
	StartedAt     time.Time `json:"started_at"`
	SettledBefore time.Time `json:"settled_before"`
	// Complete is false while the run goes on, and after a run that failed:
	// the files hold every batch whose rows were deleted, and maybe the last
	// one's although its deletion did not commit.
	Complete  bool            `json:"complete"`
	Batches   int64           `json:"batches"`
	Envelopes int64           `json:"envelopes"`
	Tables    []TableManifest `json:"tables"`
}

// TableManifest describes one table's file.
type TableManifest struct {
	Table   string           `json:"table"`
	File    string           `json:"file"`
	Columns []string         `json:"columns"`
	Rows    int64            `json:"rows"`
	Sums    map[string]int64 `json:"sums,omitempty"`
}

// newManifest describes a set whose rows are copied under migration
// version of the database (not the running build's migrations.Version: a
// build may run against a newer schema, and SELECT * writes its columns).
func newManifest(started time.Time, version int) Manifest {
	return Manifest{Format: "PostgreSQL COPY text format", SchemaVersion: version, StartedAt: started.UTC()}
}

// setMark is where a set stands before a batch.
type setMark struct {
	files              []fileState
	batches, envelopes int64
}

// check compares what a batch deleted with what it added to the files
// since m.
func (s *set) check(m setMark, d dbsqlc.RetentionDeleteRow, locked int) error {
	rows := map[string]int64{}
	sums := map[string]map[string]int64{}
	for i, t := range s.files {
		rows[t.spec.name] = t.rows - m.files[i].rows
		sums[t.spec.name] = map[string]int64{}
		for j, sm := range t.spec.sums {
			sums[t.spec.name][sm.name] = t.sums[j] - m.files[i].sums[j]
		}
	}
	for _, c := range []struct {
		what           string
		deleted, filed int64
	}{
		{"envelopes locked", int64(locked), d.Envelopes},
		{"envelopes", d.Envelopes, rows["envelopes"]},
		{"envelopes.total_cents", d.TotalCents, sums["envelopes"]["total_cents"]},
		{"envelopes.claimed_cents", d.ClaimedCents, sums["envelopes"]["claimed_cents"]},
		{"envelopes.refunded_cents", d.RefundedCents, sums["envelopes"]["refunded_cents"]},
		{"packets", d.Packets, rows["packets"]},
		{"packets.amount_cents", d.PacketCents, sums["packets"]["amount_cents"]},
		{"claimed packets' cents", d.PacketClaimedCents, sums["packets"]["claimed_cents"]},
		{"refunded packets' cents", d.PacketRefundedCents, sums["packets"]["refunded_cents"]},
		{"envelope_recipients", d.Recipients, rows["envelope_recipients"]},
		{"split_commitments", d.Commitments, rows["split_commitments"]},
		{"events", d.Events, rows["events"]},
		{"claim_conflicts", d.Conflicts, rows["claim_conflicts"]},
	} {
		if c.deleted != c.filed {
			return fmt.Errorf("%w: %s: %d deleted, %d archived", ErrMismatch, c.what, c.deleted, c.filed)
		}
	}
	return balanced(d)
}

// balanced checks that the money a batch deleted adds up, as it does for
// every settled or failed envelope: the files must not be the only record
// of a ledger that was wrong (flusher audit names the envelope).
func balanced(d dbsqlc.RetentionDeleteRow) error {
	for _, c := range []struct {
		what string
		a, b int64
	}{
		{"claims rows against the claimed packets", d.Claims, d.ClaimedPackets},
		{"claims' cents against the claimed packets'", d.ClaimsCents, d.PacketClaimedCents},
		{"envelopes.total_cents against the packets'", d.TotalCents, d.PacketCents},
		{"envelopes.claimed_cents against the claimed packets'", d.ClaimedCents, d.PacketClaimedCents},
		{"envelopes.refunded_cents against the refunded packets'", d.RefundedCents, d.PacketRefundedCents},
		{"claimed + refunded against total_cents", d.ClaimedCents + d.RefundedCents, d.TotalCents},
	} {
		if c.a != c.b {
			return fmt.Errorf("%w: %s: %d, %d", ErrUnbalanced, c.what, c.a, c.b)
		}
	}
	return nil
}
