package audit

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWriteText(t *testing.T) {
	t.Parallel()
	rep := Report{
		Checked: 3, Packets: 30, Conflicts: 1, Took: 1500 * time.Millisecond,
		Violations: []Violation{
			{EnvelopeID: 11, Check: CheckPacketSum, Detail: "packets sum to 9 cents, total_cents is 10"},
			{EnvelopeID: 12, Check: CheckConflict, Detail: "claim of packet 5"},
		},
		Suspended: []int64{13},
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"audit FAILED: 3 envelopes, 30 packets checked in 1.5s; 2 violations (1 claim conflicts), 1 suspended\n",
		"VIOLATION envelope 11 packet_sum: packets sum to 9 cents, total_cents is 10\n",
		"VIOLATION envelope 12 conflict: claim of packet 5\n",
		"SUSPENDED envelope 13: flusher recover -envelope 13 -action reload|refund -dry-run\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(out, "audit FAILED") {
		t.Errorf("text report does not start with the summary:\n%s", out)
	}

	b.Reset()
	if err := (Report{Checked: 2}).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); !strings.HasPrefix(got, "audit OK: 2 envelopes") || strings.Count(got, "\n") != 1 {
		t.Errorf("clean text report:\n%s", got)
	}
}

func TestWriteJSON(t *testing.T) {
	t.Parallel()
	rep := Report{
		Checked: 3, Packets: 30, Conflicts: 0, Took: 250 * time.Millisecond,
		Violations: []Violation{{EnvelopeID: 11, Check: CheckRedisBehind, Detail: "d"}},
		Suspended:  []int64{13, 14},
	}
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got jsonReport
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	if got.OK || got.Checked != 3 || got.Packets != 30 || got.TookSeconds != 0.25 ||
		!slices.Equal(got.Violations, rep.Violations) || !slices.Equal(got.Suspended, rep.Suspended) {
		t.Errorf("JSON report decodes to %+v", got)
	}
	if !strings.Contains(b.String(), `"envelope_id": 11`) || !strings.Contains(b.String(), `"check": "redis_behind"`) {
		t.Errorf("JSON names:\n%s", b.String())
	}

	b.Reset()
	if err := (Report{}).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if s := b.String(); !strings.Contains(s, `"violations": []`) || !strings.Contains(s, `"suspended": []`) ||
		!strings.Contains(s, `"ok": true`) {
		t.Errorf("empty JSON report:\n%s", s)
	}
}
