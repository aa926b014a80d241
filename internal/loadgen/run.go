package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Run drives one load and writes the report: the text report, or with -json
// one JSON object, on stdout; progress and failures on stderr. It returns the
// exit status: 0, or 1 on a violation, too many errors or a failure to start.
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) int {
	res, err := run(ctx, c, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 1
	}
	if c.JSON {
		err = res.WriteJSON(stdout)
	} else {
		err = res.WriteText(stdout)
	}
	if err == nil && c.HTML != "" {
		err = WriteHTMLFile(c.HTML, res)
	}
	if err != nil {
		fmt.Fprintln(stderr, "loadgen: write report:", err)
		return 1
	}
	if !res.OK {
		if c.JSON { // the text report already says why
			for _, v := range res.Texts {
				fmt.Fprintln(stderr, "loadgen: VIOLATION", v)
			}
			for _, f := range res.Failures {
				fmt.Fprintln(stderr, "loadgen: FAILED", f)
			}
		}
		fmt.Fprintf(stderr, "loadgen: failed: %d violations, %d other failures\n", res.Violations, len(res.Failures))
		return 1
	}
	return 0
}

func run(ctx context.Context, c Config, stderr io.Writer) (*Result, error) {
	d := &driver{cfg: c, cl: newClient(c), runTag: runTag()}
	defer d.cl.close()
	if !c.Noop {
		d.check = NewChecker()
	}
	if c.DatabaseURL != "" {
		w, err := newPGWatcher(ctx, c.DatabaseURL, d.check)
		if err != nil {
			return nil, err
		}
		defer w.close()
		d.watch = w
	}
	createStart := time.Now()
	if err := d.createEnvelopes(ctx); err != nil {
		return nil, err
	}
	createTime := time.Since(createStart)

	stopWatch, watchDone := make(chan struct{}), make(chan struct{})
	if d.watch != nil {
		go d.watch.run(c.PGPoll, stopWatch, watchDone)
	} else {
		close(watchDone)
	}
	var stopProgress context.CancelFunc = func() {}
	progressDone := make(chan struct{})
	if isTerminal(stderr) {
		var pctx context.Context
		pctx, stopProgress = context.WithCancel(ctx)
		go func() { defer close(progressDone); progress(pctx, stderr, d, time.Now()) }()
	} else {
		close(progressDone)
	}
	st, elapsed := d.drive(ctx)
	stopProgress()
	<-progressDone
	close(stopWatch)
	<-watchDone

	res := d.result(st, elapsed, createTime)
	if d.watch != nil {
		// The drain is bounded by -flush-timeout and runs even after an
		// interrupt: a stopped load still owes its figures and checks.
		res.Flush = d.flushResult()
		lags, answered := d.watch.lagsByAnswer()
		addFlushLag(res.Timeline, d.started, lags, answered)
	}
	d.finish(res)
	return res, nil
}

// runTag is a short random tag in every user id of the run.
func runTag() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// createEnvelopes makes the run's envelopes, one after the other: creating
// is set-up, not what the tool measures.
func (d *driver) createEnvelopes(ctx context.Context) error {
	c := d.cfg
	for i := range c.Envelopes {
		e, err := d.cl.create(ctx, createRequest{
			SenderID: "loadgen-" + d.runTag, TotalCents: c.TotalCents, Count: c.Packets,
			ExpiresInSeconds: int64(c.Expires / time.Second),
		})
		if err != nil {
			return fmt.Errorf("envelope %d of %d: %w", i+1, c.Envelopes, err)
		}
		if !c.Noop && (e.Count != c.Packets || e.TotalCents != c.TotalCents || e.Status != "open") {
			return fmt.Errorf("envelope %d created as %+v, asked for %d packets, %d cents", e.EnvelopeID, e, c.Packets, c.TotalCents)
		}
		d.envs = append(d.envs, &envState{id: e.EnvelopeID, url: d.cl.grabURL(e.EnvelopeID), count: c.Packets, total: c.TotalCents})
		if d.check != nil {
			d.check.AddEnvelope(e.EnvelopeID, c.Packets, c.TotalCents)
		}
	}
	return nil
}

func (d *driver) result(st workerStats, elapsed, createTime time.Duration) *Result {
	lat := Summarize(st.lat) // sorts st.lat, which the histogram needs
	r := &Result{
		Config: newResultConfig(d.cfg), StopReason: d.reason,
		CreateS: createTime.Seconds(), ElapsedS: elapsed.Seconds(),
		Grabs: st.first + st.repeats, FirstGrabs: st.first, RepeatGrabs: st.repeats, Granted: st.granted,
		Latency:      latencyUS(lat),
		Histogram:    histogram(st.lat),
		Timeline:     d.timeline,
		StatusCounts: map[string]int64{}, ErrorCodes: st.codes,
		Transport: st.transport, Timeouts: st.timeouts, FirstError: st.firstErr,
		Errors: st.failed, AllSoldOut: d.allSoldOut(), Checked: d.check != nil,
		Texts: []string{}, Failures: []string{},
	}
	for k, v := range st.status {
		r.StatusCounts[strconv.Itoa(k)] = v
	}
	if s := elapsed.Seconds(); s > 0 {
		r.GrabsPerS = float64(r.Grabs) / s
		r.GrantedPerS = float64(r.Granted) / s
	}
	if r.Grabs > 0 {
		r.ErrorShare = float64(r.Errors) / float64(r.Grabs)
	}
	return r
}

func (d *driver) flushResult() *FlushResult {
	c := d.cfg
	m := d.watch.drain(c.FlushTimeout, c.PGPoll)
	lag, seen, polls, lastSeen := d.watch.stats()
	f := &FlushResult{Claims: seen + m.count, Seen: seen, Missing: m.count, Complete: m.count == 0,
		Polls: polls, Lag: lagMS(lag), DrainMS: -1}
	if f.Complete && seen > 0 {
		f.DrainMS = max(ms(lastSeen.Sub(time.Unix(0, d.lastGrant.Load()))), 0)
	} else if f.Complete {
		f.DrainMS = 0
	}
	if !f.Complete {
		msg := fmt.Sprintf("%d granted claims not in PostgreSQL %s after the load, e.g. packet %d of envelope %d answered to %s",
			m.count, c.FlushTimeout, m.packetID, m.claim.env, m.claim.user)
		if m.lastErr != nil {
			msg += " (last poll: " + m.lastErr.Error() + ")"
		}
		d.check.Violation("%s", msg)
	}
	ids := make([]int64, len(d.envs))
	for i, e := range d.envs {
		ids[i] = e.id
	}
	var err error
	f.PGClaims, f.PGUnanswered, err = d.watch.verifyEnvelopes(ids)
	if err != nil {
		d.check.Violation("could not check the envelopes' claims in PostgreSQL: %v", err)
	}
	return f
}

// finish runs the end-of-run checks and decides the outcome.
func (d *driver) finish(r *Result) {
	for _, e := range d.envs {
		er := EnvelopeResult{ID: e.id, Packets: e.count, TotalCents: e.total, SoldOut: e.soldOut.Load()}
		if d.check != nil {
			t := d.check.Totals(e.id)
			er.Granted, er.GrantedCents, er.Unanswered = t.Granted, t.GrantedCents, t.Unanswered
		}
		r.Envelopes = append(r.Envelopes, er)
	}
	if d.check != nil {
		d.check.Finish()
		n, texts := d.check.Violations()
		r.Violations, r.Texts = n, append(r.Texts, texts...)
	}
	if r.ErrorShare > d.cfg.MaxErrors {
		r.Failures = append(r.Failures, fmt.Sprintf("%.2f%% of grabs failed (5xx or transport), more than -max-errors %.2f%%",
			100*r.ErrorShare, 100*d.cfg.MaxErrors))
	}
	if r.Grabs == 0 {
		r.Failures = append(r.Failures, "no grab was made")
	}
	r.OK = r.Violations == 0 && len(r.Failures) == 0
}
