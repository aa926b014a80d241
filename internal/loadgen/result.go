package loadgen

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Result is a run's outcome; with -json it is written as one object. Units
// are in the field names.
type Result struct {
	Config       resultConfig     `json:"config"`
	StopReason   string           `json:"stop_reason"`
	CreateS      float64          `json:"create_s"`
	ElapsedS     float64          `json:"elapsed_s"`
	Grabs        int64            `json:"grabs"`
	FirstGrabs   int64            `json:"first_grabs"`
	RepeatGrabs  int64            `json:"repeat_grabs"`
	Granted      int64            `json:"granted"`
	GrabsPerS    float64          `json:"grabs_per_s"`
	GrantedPerS  float64          `json:"granted_per_s"`
	Latency      LatencyUS        `json:"latency"`
	StatusCounts map[string]int64 `json:"status_counts"`
	ErrorCodes   map[string]int64 `json:"error_codes"`
	Transport    int64            `json:"transport_errors"`
	Timeouts     int64            `json:"timeouts"`
	FirstError   string           `json:"first_transport_error,omitempty"`
	Errors       int64            `json:"errors"`
	ErrorShare   float64          `json:"error_share"`
	AllSoldOut   bool             `json:"all_sold_out"`
	Envelopes    []EnvelopeResult `json:"envelopes"`
	Flush        *FlushResult     `json:"flush,omitempty"`
	Timeline     []Second         `json:"timeline"`
	Histogram    []Bucket         `json:"latency_histogram"`
	Checked      bool             `json:"checked"`
	Violations   int              `json:"violation_count"`
	Texts        []string         `json:"violations"`
	Failures     []string         `json:"failures"`
	OK           bool             `json:"ok"`
}

type resultConfig struct {
	URL          string  `json:"url"`
	Envelopes    int     `json:"envelopes"`
	Packets      int     `json:"packets_per_envelope"`
	TotalCents   int64   `json:"total_cents_per_envelope"`
	ExpiresS     float64 `json:"expires_s"`
	Users        int     `json:"users"`
	Repeat       float64 `json:"repeat_share"`
	MaxGrabs     int64   `json:"max_grabs"`
	DurationS    float64 `json:"max_duration_s"`
	TimeoutMS    float64 `json:"timeout_ms"`
	Database     bool    `json:"database_checked"`
	FlushTimeout float64 `json:"flush_timeout_s"`
	PGPollMS     float64 `json:"pg_poll_ms"`
	MaxErrors    float64 `json:"max_error_share"`
	Noop         bool    `json:"noop"`
}

func newResultConfig(c Config) resultConfig {
	return resultConfig{
		URL: c.URL, Envelopes: c.Envelopes, Packets: c.Packets, TotalCents: c.TotalCents,
		ExpiresS: c.Expires.Seconds(), Users: c.Users, Repeat: c.Repeat, MaxGrabs: c.Grabs,
		DurationS: c.Duration.Seconds(), TimeoutMS: ms(c.Timeout), Database: c.DatabaseURL != "",
		FlushTimeout: c.FlushTimeout.Seconds(), PGPollMS: ms(c.PGPoll), MaxErrors: c.MaxErrors, Noop: c.Noop,
	}
}

// LatencyUS is a latency distribution in microseconds.
type LatencyUS struct {
	Count int     `json:"count"`
	Min   float64 `json:"min_us"`
	Mean  float64 `json:"mean_us"`
	P50   float64 `json:"p50_us"`
	P95   float64 `json:"p95_us"`
	P99   float64 `json:"p99_us"`
	Max   float64 `json:"max_us"`
}

func latencyUS(s Summary) LatencyUS {
	return LatencyUS{Count: s.Count, Min: us(s.Min), Mean: us(s.Mean), P50: us(s.P50), P95: us(s.P95), P99: us(s.P99), Max: us(s.Max)}
}

// LagMS is a flush lag distribution in milliseconds.
type LagMS struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

func lagMS(s Summary) LagMS {
	return LagMS{Count: s.Count, Mean: ms(s.Mean), P50: ms(s.P50), P95: ms(s.P95), P99: ms(s.P99), Max: ms(s.Max)}
}

// EnvelopeResult is one envelope's outcome as the answers tell it.
type EnvelopeResult struct {
	ID           int64 `json:"envelope_id"`
	Packets      int   `json:"packets"`
	TotalCents   int64 `json:"total_cents"`
	Granted      int   `json:"granted"`
	GrantedCents int64 `json:"granted_cents"`
	SoldOut      bool  `json:"sold_out"`
	Unanswered   int   `json:"unanswered_first_grabs"`
}

// FlushResult is what PostgreSQL showed, with -database-url.
type FlushResult struct {
	Claims   int   `json:"claims"` // granted claims looked for
	Seen     int   `json:"seen"`
	Missing  int   `json:"missing"`
	Complete bool  `json:"complete"`
	Polls    int   `json:"polls"`
	Lag      LagMS `json:"lag"`
	// DrainMS: from the last 200 that granted a packet until PostgreSQL
	// held every granted claim (-1 when it never did within -flush-timeout).
	DrainMS float64 `json:"last_grant_to_all_in_pg_ms"`
	// PGClaims are the claims PostgreSQL holds in the run's envelopes;
	// PGUnanswered of them belong to first grabs that got no usable answer.
	PGClaims     int `json:"pg_claims"`
	PGUnanswered int `json:"pg_claims_of_unanswered_grabs"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }

// WriteJSON writes r as one JSON object and a newline.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes r for a person.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	c := r.Config
	mode := "checked"
	if c.Noop {
		mode = "no-op reference, answers not checked"
	}
	fmt.Fprintf(&b, "target      %s (%s)\n", c.URL, mode)
	fmt.Fprintf(&b, "load        %d envelopes x %d packets (%d cents each), %d users, repeat %.2f; stopped: %s\n",
		c.Envelopes, c.Packets, c.TotalCents, c.Users, c.Repeat, r.StopReason)
	fmt.Fprintf(&b, "grabs       %d in %.2fs = %.0f grabs/s (%d first, %d repeats); granted %d = %.0f/s\n",
		r.Grabs, r.ElapsedS, r.GrabsPerS, r.FirstGrabs, r.RepeatGrabs, r.Granted, r.GrantedPerS)
	l := r.Latency
	fmt.Fprintf(&b, "latency     p50 %s  p95 %s  p99 %s  max %s  (mean %s)\n",
		fmtUS(l.P50), fmtUS(l.P95), fmtUS(l.P99), fmtUS(l.Max), fmtUS(l.Mean))
	fmt.Fprintf(&b, "answers     %s\n", r.answersLine())
	fmt.Fprintf(&b, "errors      %d (%.2f%%): %d transport (%d timeouts)", r.Errors, 100*r.ErrorShare, r.Transport, r.Timeouts)
	if r.FirstError != "" {
		fmt.Fprintf(&b, "; first: %s", r.FirstError)
	}
	b.WriteString("\n")
	if f := r.Flush; f != nil {
		fmt.Fprintf(&b, "flush lag   p50 %.0fms  p95 %.0fms  p99 %.0fms  max %.0fms  (%d of %d claims seen in PostgreSQL, %d polls)\n",
			f.Lag.P50, f.Lag.P95, f.Lag.P99, f.Lag.Max, f.Seen, f.Claims, f.Polls)
		if f.Complete {
			fmt.Fprintf(&b, "flush drain PostgreSQL held every claim %.0fms after the last granting 200\n", f.DrainMS)
		} else {
			fmt.Fprintf(&b, "flush drain %d claims still missing from PostgreSQL after %.0fs\n", f.Missing, c.FlushTimeout)
		}
	}
	if r.Checked {
		fmt.Fprintf(&b, "checks      %d violations; every envelope sold out: %v\n", r.Violations, r.AllSoldOut)
	}
	for _, v := range r.Texts {
		fmt.Fprintf(&b, "  VIOLATION %s\n", v)
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "  FAILED    %s\n", f)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Result) answersLine() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.StatusCounts)) {
		parts = append(parts, k+": "+strconv.FormatInt(r.StatusCounts[k], 10))
	}
	for _, k := range slices.Sorted(maps.Keys(r.ErrorCodes)) {
		name := k
		if name == "" {
			name = "(no code)"
		}
		parts = append(parts, name+": "+strconv.FormatInt(r.ErrorCodes[k], 10))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "  ")
}

func fmtUS(v float64) string {
	if v >= 1000 {
		return strconv.FormatFloat(v/1000, 'f', 2, 64) + "ms"
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + "µs"
}
