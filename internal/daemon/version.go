package daemon

import (
	"fmt"

	"redpacket/internal/telemetry"
)

// Version is the line `-version` prints: the daemon's name, its version and
// commit, and the Go release that built it. They are the ones the
// redpacket_build_info metric carries (telemetry.BuildInfo), stamped at build
// time with
//
//	go build -ldflags "-X redpacket/internal/telemetry.version=v1.4.0 -X redpacket/internal/telemetry.commit=$(git rev-parse HEAD)"
func Version(name string) string {
	b := telemetry.BuildInfo()
	return fmt.Sprintf("%s %s commit %s %s", name, b.Version, b.Commit, b.GoVersion)
}
