package telemetry

import (
	"bufio"
	"encoding/json"
	stdlog "log"
	"os"
	"strings"
	"testing"
)

// What a library prints through the standard logger is a warning in the
// daemon's JSON log, seen by an operator who filters out info. Not
// parallel: it takes over os.Stderr and the standard logger.
func TestStdLogLinesAreWarnings(t *testing.T) {
	out, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = out // the logger writes to the os.Stderr of when it is built
	log, err := NewLogger("grabber", "info")
	os.Stderr = saved
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdlog.SetOutput(os.Stderr); stdlog.SetFlags(stdlog.LstdFlags); stdlog.SetPrefix("") })
	stdlog.Print("http: Accept error: accept tcp [::]:8080: accept4: too many open files; retrying in 1s")
	_ = log.Sync()

	if _, err := out.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for sc := bufio.NewScanner(out); sc.Scan(); {
		lines = append(lines, sc.Text())
		var l struct{ Level, Msg, Daemon string }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || !strings.Contains(l.Msg, "too many open files") {
			continue
		}
		if l.Level != "warn" || l.Daemon != "grabber" {
			t.Fatalf("logged %s, want level warn and daemon grabber", sc.Text())
		}
		return
	}
	t.Fatalf("the standard logger's line is not in the JSON log: %q", lines)
}
