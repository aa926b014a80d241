package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// WriteText writes the report for a person: a summary line, one line per
// violation, then the suspended envelopes with the commands that resolve them.
func (r Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, r.summary())
	for _, v := range r.Violations {
		fmt.Fprintf(bw, "VIOLATION envelope %d %s: %s\n", v.EnvelopeID, v.Check, v.Detail)
	}
	if len(r.Suspended) > 0 {
		fmt.Fprintln(bw, "Suspended envelopes (Redis lost their state) wait for an operator. For each, look at what")
		fmt.Fprintln(bw, "a recovery would do, then run it without -dry-run: reload puts the packets PostgreSQL shows")
		fmt.Fprintln(bw, "unclaimed back on offer, refund settles the envelope and refunds them.")
		for _, id := range r.Suspended {
			fmt.Fprintf(bw, "SUSPENDED envelope %d: flusher recover -envelope %d -action reload|refund -dry-run\n", id, id)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("audit: write text report: %w", err)
	}
	return nil
}

func (r Report) summary() string {
	verdict := "OK"
	if !r.OK() {
		verdict = "FAILED"
	}
	return fmt.Sprintf("audit %s: %d envelopes, %d packets checked in %s; %d violations (%d claim conflicts), %d suspended",
		verdict, r.Checked, r.Packets, r.Took.Round(time.Millisecond), len(r.Violations), r.Conflicts, len(r.Suspended))
}

// jsonReport is the report's JSON form: snake_case names, lists never null,
// and the duration in seconds so tools need not parse Go durations.
type jsonReport struct {
	OK          bool        `json:"ok"`
	Checked     int         `json:"checked"`
	Packets     int64       `json:"packets"`
	Violations  []Violation `json:"violations"`
	Suspended   []int64     `json:"suspended"`
	Conflicts   int         `json:"conflicts"`
	TookSeconds float64     `json:"took_seconds"`
}

// WriteJSON writes the report as one JSON object for tools.
func (r Report) WriteJSON(w io.Writer) error {
	out := jsonReport{
		OK: r.OK(), Checked: r.Checked, Packets: r.Packets,
		Violations: r.Violations, Suspended: r.Suspended,
		Conflicts: r.Conflicts, TookSeconds: r.Took.Seconds(),
	}
	if out.Violations == nil {
		out.Violations = []Violation{}
	}
	if out.Suspended == nil {
		out.Suspended = []int64{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("audit: write json report: %w", err)
	}
	return nil
}
