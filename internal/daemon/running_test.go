package daemon

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The image's HEALTHCHECK (`flusher healthcheck -running`) finds the daemon
// running in the container by its command line: a grabber or a flusher run
// without arguments, never a flusher command, a health check, nor the
// process asking.
func TestRunningDaemons(t *testing.T) {
	proc := t.TempDir()
	for pid, argv := range map[string]string{
		"1":    "grabber\x00",
		"7":    "/usr/local/bin/flusher\x00",
		"12":   "flusher\x00migrate\x00",
		"13":   "grabber\x00healthcheck\x00",
		"14":   "flusher\x00healthcheck\x00-running\x00",
		"15":   "",            // a zombie
		"99":   "flusher\x00", // the process asking
		"self": "flusher\x00",
	} {
		if err := os.MkdirAll(filepath.Join(proc, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, pid, "cmdline"), []byte(argv), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := Running(proc, 99); !slices.Equal(got, []string{"flusher", "grabber"}) {
		t.Errorf("both: %v", got)
	}
	_ = os.RemoveAll(filepath.Join(proc, "7"))
	if got := Running(proc, 99); !slices.Equal(got, []string{"grabber"}) {
		t.Errorf("grabber alone: %v", got)
	}
	_ = os.RemoveAll(filepath.Join(proc, "1"))
	if got := Running(proc, 99); len(got) != 0 {
		t.Errorf("no daemon: %v", got)
	}
}
