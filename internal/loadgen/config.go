// Package loadgen is a load tool for a deployment of the red-packet service:
// it creates envelopes over HTTP, drives grabs with many concurrent virtual
// users, checks every answer for correctness as it goes, optionally watches
// PostgreSQL to measure how long granted claims take to become durable, and
// reports rates, latency percentiles and answers. It also serves a no-op
// reference server with the grabber's HTTP stack, for same-run comparisons.
package loadgen

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// Config is one load run.
type Config struct {
	URL          string        `json:"url"`
	Token        string        `json:"-"`
	Envelopes    int           `json:"envelopes"`
	Packets      int           `json:"packets_per_envelope"`
	TotalCents   int64         `json:"total_cents_per_envelope"`
	Expires      time.Duration `json:"-"`
	Users        int           `json:"users"`
	Repeat       float64       `json:"repeat_share"`
	Grabs        int64         `json:"max_grabs"`
	Duration     time.Duration `json:"-"`
	Timeout      time.Duration `json:"-"`
	DatabaseURL  string        `json:"-"`
	FlushTimeout time.Duration `json:"-"`
	PGPoll       time.Duration `json:"-"`
	MaxErrors    float64       `json:"max_error_share"`
	JSON         bool          `json:"-"`
	HTML         string        `json:"-"`
	Noop         bool          `json:"noop"`
}

// defaultDuration bounds a run given neither -duration nor -grabs.
const defaultDuration = 10 * time.Second

// ParseFlags reads the load driver's flags; getenv supplies defaults that come
// from the environment (the API token).
func ParseFlags(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.URL, "url", "http://127.0.0.1:8080", "base URL of the grabber")
	fs.StringVar(&c.Token, "token", getenv("GRABBER_API_TOKEN"), "bearer token (default $GRABBER_API_TOKEN)")
	fs.IntVar(&c.Envelopes, "envelopes", 4, "envelopes to create")
	fs.IntVar(&c.Packets, "packets", 5000, "packets per envelope")
	fs.Int64Var(&c.TotalCents, "total-cents", 1_000_000, "total cents per envelope")
	fs.DurationVar(&c.Expires, "expires", time.Hour, "envelope lifetime (whole seconds)")
	fs.IntVar(&c.Users, "users", 50, "concurrent virtual users (connections)")
	fs.Float64Var(&c.Repeat, "repeat", 0.1, "share of grabs that re-grab an envelope the user already holds a packet of")
	fs.Int64Var(&c.Grabs, "grabs", 0, "stop after this many grab requests (default: no limit)")
	fs.DurationVar(&c.Duration, "duration", 0,
		"stop after this long (default 10s when -grabs is not given either; none when only -grabs is)")
	fs.DurationVar(&c.Timeout, "timeout", 5*time.Second, "per-request timeout")
	fs.StringVar(&c.DatabaseURL, "database-url", "", "PostgreSQL to watch for flush lag and to check claims against (optional)")
	fs.DurationVar(&c.FlushTimeout, "flush-timeout", 30*time.Second, "after the load, how long to wait for PostgreSQL to hold every granted claim")
	fs.DurationVar(&c.PGPoll, "pg-poll", 50*time.Millisecond, "PostgreSQL poll interval (the resolution of the flush lag)")
	fs.Float64Var(&c.MaxErrors, "max-errors", 0.01, "fail when more than this share of grabs get a 5xx or a transport error")
	fs.BoolVar(&c.JSON, "json", false, "write one JSON result object on stdout instead of the text report")
	fs.StringVar(&c.HTML, "html", "", "also write the run as a self-contained HTML page (charts in inline SVG) to this file")
	fs.BoolVar(&c.Noop, "noop", false, "the target is `loadgen noop-server`: its answers are fake, so no correctness checks")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	// The load ends at whichever bound it reaches first, sold out or
	// interrupted; with no bound given it runs for defaultDuration.
	if c.Grabs == 0 && c.Duration == 0 {
		c.Duration = defaultDuration
	}
	return c, c.validate()
}

func (c Config) validate() error {
	var errs []error
	check := func(ok bool, msg string) {
		if !ok {
			errs = append(errs, errors.New(msg))
		}
	}
	check(c.Envelopes >= 1, "-envelopes must be at least 1")
	check(c.Packets >= 1, "-packets must be at least 1")
	check(c.TotalCents >= int64(c.Packets), "-total-cents must be at least -packets (1 cent a packet)")
	check(c.Expires >= time.Second && c.Expires%time.Second == 0, "-expires must be whole seconds, at least 1s")
	check(c.Users >= 1, "-users must be at least 1")
	check(c.Repeat >= 0 && c.Repeat < 1, "-repeat must be in [0, 1)")
	check(c.Grabs >= 0, "-grabs must not be negative")
	check(c.Duration >= 0, "-duration must not be negative")
	check(c.Grabs > 0 || c.Duration > 0, "give -grabs or -duration (or neither: 10s)")
	check(c.Timeout > 0, "-timeout must be positive")
	check(c.FlushTimeout > 0, "-flush-timeout must be positive")
	check(c.PGPoll > 0, "-pg-poll must be positive")
	check(c.MaxErrors >= 0 && c.MaxErrors <= 1, "-max-errors must be in [0, 1]")
	check(!c.Noop || c.DatabaseURL == "", "-noop and -database-url exclude each other: the no-op server writes nothing")
	return errors.Join(errs...)
}

const usage = `usage:
  loadgen [flags]                      drive a grab load against a deployment
  loadgen noop-server [-addr host:port] serve fake answers with the grabber's HTTP stack (the reference)
  loadgen bench-page -in X.json -out X.html
                                       the page of a make bench run (bench/run.sh writes it)

The load stops at the first of: -duration, -grabs, every envelope sold out, SIGINT or
SIGTERM. With neither -duration nor -grabs it runs for 10s. Every flag is described in
docs/loadgen.md.

Exit status: 0 success; 1 a correctness violation, too many errors, claims missing
from PostgreSQL, or the run could not start; 2 bad flags.

flags:
`
