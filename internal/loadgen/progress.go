package loadgen

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// isTerminal reports whether w is a terminal (a character device), where a
// progress line that rewrites itself makes sense.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress rewrites one status line on out every second until ctx ends.
func progress(ctx context.Context, out io.Writer, d *driver, start time.Time) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var lastDone int64
	for {
		select {
		case <-ctx.Done():
			fmt.Fprint(out, "\r\033[K")
			return
		case now := <-t.C:
			done := d.done.Load()
			fmt.Fprintf(out, "\r\033[K%5.1fs  grabs %d (%d/s)  granted %d  errors %d",
				now.Sub(start).Seconds(), done, done-lastDone, d.granted.Load(), d.failed.Load())
			lastDone = done
		}
	}
}
