package ledgerexport

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"redpacket/internal/envelope"
	"redpacket/internal/flush"
	"redpacket/internal/pgstore"
	"redpacket/internal/testenv"
	"redpacket/internal/testenv/stack"
)

// settledDay makes envelopes that sell out and that expire with packets
// left (one untouched), and settles them all; it returns the total of each
// envelope.
func settledDay(t *testing.T, s *stack.Stack) map[int64]int64 {
	t.Helper()
	ctx := context.Background()
	totals := map[int64]int64{}
	one := int64(1)
	for i, n := range []int{3, 0, 2, 5} {
		req := envelope.CreateRequest{SenderID: fmt.Sprintf("s%d", i%2), TotalCents: 1000 + int64(i), Count: 3}
		if n < 3 {
			req.ExpiresInSeconds = &one
		}
		e, err := s.Svc.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		totals[e.ID] = req.TotalCents
		for u := range min(n, 3) {
			if _, err := s.Svc.Grab(ctx, e.ID, fmt.Sprintf("u%d", u)); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(1100 * time.Millisecond) // the short ones expire
	f := flush.New(s.Redis, s.PG, flush.Config{KeyTTL: time.Hour}, zaptest.NewLogger(t))
	for range 2 { // close, then settle
		if err := f.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		if err := f.Settle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return totals
}

func TestExportBalancesEverySettledEnvelope(t *testing.T) {
	s := stack.New(t) // not parallel: it changes pageSize
	pageSize = 2
	t.Cleanup(func() { pageSize = 5000 })
	totals := settledDay(t, s)
	now := s.Clock.Now().UTC() // the day funding and claims are dated (refunds may fall on the next)
	since, until, err := Range(now.AddDate(0, 0, -1).Format(time.DateOnly), now.AddDate(0, 0, 1).Format(time.DateOnly), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	sums := exportedCSVSums(t, s, since, until)
	checkSumsBalance(t, s, totals, sums)

	// Days without movements export the header alone; jsonl exports objects.
	since, until, _ = Range("2020-01-01", "2020-01-31", time.UTC)
	var out bytes.Buffer
	w, _ := NewWriter(&out, "jsonl")
	if err := Export(t.Context(), s.PG, since, until, w.Write); err != nil || w.Close() != nil || out.Len() != 0 {
		t.Errorf("a month of nothing: %q, %v", out.String(), err)
	}
	since, until, _ = Range(now.Format(time.DateOnly), now.Format(time.DateOnly), time.UTC)
	if err := Export(t.Context(), s.PG, since, until, w.Write); err != nil || w.Close() != nil {
		t.Fatal(err)
	}
	var first movementJSON
	if err := json.Unmarshal(bytes.SplitN(out.Bytes(), []byte("\n"), 2)[0], &first); err != nil || first.Kind != Funded {
		t.Errorf("jsonl line %q: %v", out.String(), err)
	}
}

// An envelope may start up to 7 days after its creation and then last 7
// days: its claims are exported with the days they were made in, though
// it was created 13 days before them.
func TestExportFindsClaimsOfAnEnvelopeCreatedTwoWeeksBefore(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	totals := settledDay(t, s)
	ids := make([]int64, 0, len(totals))
	for id := range totals {
		ids = append(ids, id)
	}
	if _, err := s.Pool.Exec(t.Context(), `UPDATE envelopes SET created_at = created_at - interval '13 days'
		WHERE id = ANY($1)`, ids); err != nil {
		t.Fatal(err)
	}
	now := s.Clock.Now().UTC() // the day funding and claims are dated (refunds may fall on the next)
	since, until, _ := Range(now.Format(time.DateOnly), now.AddDate(0, 0, 1).Format(time.DateOnly), time.UTC)
	sums := exportedCSVSums(t, s, since, until)
	for id := range totals {
		e, err := s.PG.Envelope(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got := sums[id][Claimed]; got != e.ClaimedCents || sums[id][Funded] != 0 {
			t.Errorf("envelope %d: exported %v, want claimed %d and no funding (created 13 days ago)", id, sums[id], e.ClaimedCents)
		}
	}
}

// The export reads one snapshot: claims deleted while it runs (as
// retention deletes an archived envelope's) are exported as they were.
func TestExportReadsOneSnapshot(t *testing.T) {
	s := stack.New(t) // not parallel: it changes pageSize
	pageSize = 2
	t.Cleanup(func() { pageSize = 5000 })
	totals := settledDay(t, s)
	now := s.Clock.Now().UTC() // the day funding and claims are dated (refunds may fall on the next)
	since, until, _ := Range(now.Format(time.DateOnly), now.AddDate(0, 0, 1).Format(time.DateOnly), time.UTC)
	deleted := false
	sums := map[int64]map[Kind]int64{}
	err := Export(t.Context(), s.PG, since, until, func(m Movement) error {
		if !deleted {
			deleted = true
			if _, err := s.Pool.Exec(t.Context(), `DELETE FROM claims`); err != nil {
				return err
			}
		}
		if sums[m.EnvelopeID] == nil {
			sums[m.EnvelopeID] = map[Kind]int64{}
		}
		sums[m.EnvelopeID][m.Kind] += m.AmountCents
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var left int
	if err := s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM claims`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("claims left after the delete: %d, %v", left, err)
	}
	checkSumsBalance(t, s, totals, sums)
}

// An export whose reader is slow (a pipe) outlasts a DBA's
// idle_in_transaction_session_timeout: it ended half-way, its output cut
// short, with the connection terminated.
func TestExportOutlastsTheDatabasesIdleLimit(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	totals := settledDay(t, s)
	limited := testenv.LimitedPool(t, s.Pool, s.DBURL, "idle_in_transaction_session_timeout", "200ms")
	now := s.Clock.Now().UTC()
	since, until, _ := Range(now.Format(time.DateOnly), now.AddDate(0, 0, 1).Format(time.DateOnly), time.UTC)
	sums := map[int64]map[Kind]int64{}
	slow := true
	err := Export(t.Context(), pgstore.New(limited), since, until, func(m Movement) error {
		if slow { // the reader falls behind once, longer than the limit
			slow = false
			time.Sleep(600 * time.Millisecond)
		}
		if sums[m.EnvelopeID] == nil {
			sums[m.EnvelopeID] = map[Kind]int64{}
		}
		sums[m.EnvelopeID][m.Kind] += m.AmountCents
		return nil
	})
	if err != nil {
		t.Fatalf("export with a slow reader under a 200ms idle limit: %v", err)
	}
	checkSumsBalance(t, s, totals, sums)
}

// exportedCSVSums exports since..until as CSV, checks the header and each
// row, and sums the amounts per envelope and kind.
func exportedCSVSums(t *testing.T, s *stack.Stack, since, until time.Time) map[int64]map[Kind]int64 {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriter(&out, "csv")
	if err != nil {
		t.Fatal(err)
	}
	if err := Export(t.Context(), s.PG, since, until, w.Write); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(records[0], ",") != "time,envelope_id,sender_id,user_id,kind,amount_cents,packet_id" {
		t.Fatalf("header %v", records[0])
	}
	sums := map[int64]map[Kind]int64{}
	for _, r := range records[1:] {
		id, _ := strconv.ParseInt(r[1], 10, 64)
		amount, _ := strconv.ParseInt(r[5], 10, 64)
		if sums[id] == nil {
			sums[id] = map[Kind]int64{}
		}
		sums[id][Kind(r[4])] += amount
		if _, err := time.Parse(time.RFC3339, r[0]); err != nil || amount <= 0 {
			t.Errorf("row %v", r)
		}
	}
	return sums
}

// checkSumsBalance: sums holds exactly the envelopes of totals, each funded
// its total, claimed what PostgreSQL says, and, all being settled, funded =
// claimed + refunded.
func checkSumsBalance(t *testing.T, s *stack.Stack, totals map[int64]int64, sums map[int64]map[Kind]int64) {
	t.Helper()
	if len(sums) != len(totals) {
		t.Fatalf("movements of %d envelopes, want %d: %v", len(sums), len(totals), sums)
	}
	settled := 0
	for id, total := range totals {
		e, err := s.PG.Envelope(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		m := sums[id]
		if m[Funded] != total || m[Claimed] != e.ClaimedCents {
			t.Errorf("envelope %d: %v, want funded %d claimed %d", id, m, total, e.ClaimedCents)
		}
		if e.Status == envelope.StatusSettled {
			settled++
			if m[Funded] != m[Claimed]+m[Refunded] {
				t.Errorf("settled envelope %d: funded %d != claimed %d + refunded %d", id, m[Funded], m[Claimed], m[Refunded])
			}
		}
	}
	if settled != len(totals) {
		t.Errorf("%d envelopes settled, want all (the test setup failed)", settled)
	}
}

func TestRangeRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range [][2]string{{"2026-1-1", "2026-01-02"}, {"2026-01-02", "2026-01-01"}, {"", "2026-01-01"}} {
		if _, _, err := Range(c[0], c[1], time.UTC); err == nil {
			t.Errorf("Range(%q, %q) accepted", c[0], c[1])
		}
	}
	shanghai, _ := time.LoadLocation("Asia/Shanghai")
	since, until, err := Range("2026-11-22", "2026-11-22", shanghai)
	if err != nil || !since.Equal(time.Date(2026, 11, 21, 16, 0, 0, 0, time.UTC)) || until.Sub(since) != 24*time.Hour {
		t.Errorf("a day in Shanghai = [%v, %v), %v", since, until, err)
	}
	// Santiago's clocks skip 00:00-01:00 on 8 September 2024: the 7th
	// lasts until 04:00 UTC, and the 8th 23 hours from there.
	santiago, _ := time.LoadLocation("America/Santiago")
	for _, c := range []struct{ day, since, until string }{
		{"2024-09-07", "2024-09-07T04:00:00Z", "2024-09-08T04:00:00Z"},
		{"2024-09-08", "2024-09-08T04:00:00Z", "2024-09-09T03:00:00Z"},
	} {
		since, until, err := Range(c.day, c.day, santiago)
		if got := since.UTC().Format(time.RFC3339) + " " + until.UTC().Format(time.RFC3339); err != nil || got != c.since+" "+c.until {
			t.Errorf("%s in Santiago = %s, %v; want %s %s", c.day, got, err, c.since, c.until)
		}
	}
	if _, err := NewWriter(&bytes.Buffer{}, "xml"); err == nil {
		t.Error("format xml accepted")
	}
}
