package ledgerexport

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Formats are the output formats: csv (with a header row) or jsonl (one
// JSON object a line).
var Formats = []string{"csv", "jsonl"}

// Columns are the CSV header and the JSON members, in order.
var Columns = []string{"time", "envelope_id", "sender_id", "user_id", "kind", "amount_cents", "packet_id"}

// timeLayout is the API's: UTC with millisecond precision.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// Writer writes movements in a format; Close flushes what it buffered.
type Writer struct {
	write func(Movement) error
	Close func() error
}

// NewWriter returns a Writer of format to w.
func NewWriter(w io.Writer, format string) (*Writer, error) {
	switch format {
	case "csv":
		c := csv.NewWriter(w)
		if err := c.Write(Columns); err != nil {
			return nil, err
		}
		return &Writer{
			write: func(m Movement) error { return c.Write(fields(m)) },
			Close: func() error { c.Flush(); return c.Error() },
		}, nil
	case "jsonl":
		b := bufio.NewWriter(w)
		enc := json.NewEncoder(b)
		return &Writer{
			write: func(m Movement) error { return enc.Encode(jsonOf(m)) },
			Close: b.Flush,
		}, nil
	}
	return nil, fmt.Errorf("-format %q: want csv or jsonl", format)
}

// Write writes one movement.
func (w *Writer) Write(m Movement) error { return w.write(m) }

func fields(m Movement) []string {
	packet := ""
	if m.PacketID != 0 {
		packet = strconv.FormatInt(m.PacketID, 10)
	}
	return []string{m.Time.UTC().Format(timeLayout), strconv.FormatInt(m.EnvelopeID, 10), m.SenderID, m.UserID,
		string(m.Kind), strconv.FormatInt(m.AmountCents, 10), packet}
}

type movementJSON struct {
	Time        string `json:"time"`
	EnvelopeID  int64  `json:"envelope_id"`
	SenderID    string `json:"sender_id"`
	UserID      string `json:"user_id,omitempty"`
	Kind        Kind   `json:"kind"`
	AmountCents int64  `json:"amount_cents"`
	PacketID    int64  `json:"packet_id,omitempty"`
}

func jsonOf(m Movement) movementJSON {
	return movementJSON{Time: m.Time.UTC().Format(timeLayout), EnvelopeID: m.EnvelopeID, SenderID: m.SenderID,
		UserID: m.UserID, Kind: m.Kind, AmountCents: m.AmountCents, PacketID: m.PacketID}
}

// Progress counts movements and, on a terminal, rewrites one line about
// them at most every interval.
type Progress struct {
	out      io.Writer // nil: say nothing
	interval time.Duration
	last     time.Time
	counts   map[Kind]int64
}

// NewProgress reports to out (nil: not a terminal, say nothing).
func NewProgress(out io.Writer) *Progress {
	return &Progress{out: out, interval: time.Second, counts: map[Kind]int64{}}
}

// Count counts m and reports when the interval has passed.
func (p *Progress) Count(m Movement) {
	p.counts[m.Kind]++
	if p.out != nil && time.Since(p.last) >= p.interval {
		p.last = time.Now()
		p.line("")
	}
}

// Done writes the final line (on a terminal).
func (p *Progress) Done() {
	if p.out != nil {
		p.line("\n")
	}
}

func (p *Progress) line(end string) {
	_, _ = fmt.Fprintf(p.out, "\rexported %d funded, %d claimed, %d refunded%s",
		p.counts[Funded], p.counts[Claimed], p.counts[Refunded], end)
}
