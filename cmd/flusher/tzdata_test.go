package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Every flusher command reads ID_TIME_ZONE (config.Load), as the grabber
// does; on a host without a zone database (no /usr/share/zoneinfo, no Go
// installation) only the one embedded by time/tzdata answers, so the
// flusher must embed it as the grabber does, or it refuses
// ID_TIME_ZONE=Asia/Shanghai that the grabber accepts. Hiding the host's
// zone database takes root (a mount namespace), so this checks the link
// instead: the flusher's own packages, not this test's, import time/tzdata.
func TestFlusherEmbedsTheZoneDatabase(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command:", err)
	}
	for _, pkg := range []string{"redpacket/cmd/flusher", "redpacket/cmd/grabber"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		if !slices.Contains(strings.Fields(string(out)), "time/tzdata") {
			t.Errorf("%s does not link time/tzdata: ID_TIME_ZONE fails on a host without a zone database", pkg)
		}
	}
}
