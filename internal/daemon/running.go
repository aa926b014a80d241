package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// Running is the daemons ("grabber", "flusher") running as processes
// of proc (a /proc), but for the process self: a grabber run with no
// argument, or a flusher (a command such as `flusher migrate` or this
// health check is not the daemon). Sorted, each once.
func Running(proc string, self int) []string {
	entries, err := os.ReadDir(proc)
	if err != nil {
		return nil
	}
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(proc, e.Name(), "cmdline"))
		if err != nil {
			continue // gone since, or not ours to read
		}
		argv := bytes.Split(bytes.TrimSuffix(raw, []byte{0}), []byte{0})
		if len(argv) != 1 {
			continue
		}
		if name := filepath.Base(string(argv[0])); (name == "grabber" || name == "flusher") && !slices.Contains(found, name) {
			found = append(found, name)
		}
	}
	slices.Sort(found)
	return found
}
