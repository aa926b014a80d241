package audit

import (
	"testing"
	"time"
)

func TestExitCodeSaysWhatNeedsAnOperator(t *testing.T) {
	t.Parallel()
	violation := []Violation{{EnvelopeID: 1, Check: CheckPacketSum, Detail: "x"}}
	for _, c := range []struct {
		name string
		rep  Report
		want int
	}{
		{"clean", Report{Checked: 3}, ExitOK},
		{"suspended", Report{Checked: 3, Suspended: []int64{7}}, ExitSuspended},
		{"violation", Report{Violations: violation}, ExitViolation},
		{"violation and suspended", Report{Violations: violation, Suspended: []int64{7}}, ExitViolation},
	} {
		if got := c.rep.ExitCode(); got != c.want {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.want)
		}
	}
	if ExitSuspended == ExitViolation || ExitSuspended == ExitFailed || ExitSuspended == ExitOK {
		t.Errorf("exit status of a suspension (%d) is not distinct", ExitSuspended)
	}
}

// An audit of a database with a suspended envelope asks for exit 3, and its
// outcome is recorded for the flushers' metrics, replacing the one before.
func TestRecordKeepsTheLastOutcome(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	_, _, suspended := d.cleanSet(1001)
	rep := d.run(Options{})
	if rep.ExitCode() != ExitSuspended {
		t.Fatalf("audit with envelope %d suspended: exit %d, want %d", suspended, rep.ExitCode(), ExitSuspended)
	}
	first := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	if err := Record(d.ctx, d.pool, rep, first, false); err != nil {
		t.Fatal(err)
	}
	rep.Violations = []Violation{{EnvelopeID: 5, Check: CheckConflict}, {EnvelopeID: 6, Check: CheckConflict}}
	second := first.Add(time.Minute)
	if err := Record(d.ctx, d.pool, rep, second, true); err != nil {
		t.Fatal(err)
	}
	var at time.Time
	var rows, violations, susp, envelopes int
	var all bool
	err := d.pool.QueryRow(d.ctx, `SELECT count(*) OVER (), finished_at, violations, suspended, envelopes, all_envelopes
		FROM audit_last_run`).Scan(&rows, &at, &violations, &susp, &envelopes, &all)
	if err != nil {
		t.Fatal(err)
	}
	if rows != 1 || !at.Equal(second) || violations != 2 || susp != 1 || envelopes != rep.Checked || !all {
		t.Errorf("audit_last_run: %d rows, at %s, %d violations, %d suspended, %d envelopes, all %v; want 1 row, at %s, 2, 1, %d, true",
			rows, at, violations, susp, envelopes, all, second, rep.Checked)
	}
}
