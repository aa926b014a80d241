package telemetry

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Stamped at build time:
//
//	go build -ldflags "-X redpacket/internal/telemetry.version=v1.4.0 -X redpacket/internal/telemetry.commit=$(git rev-parse HEAD)"
//
// Empty, they are taken from the module and version-control information Go
// records in the binary (debug.ReadBuildInfo).
var version, commit string

// Build names the code a binary was built from.
type Build struct {
	Version   string // a release tag, the module's pseudo-version, or "devel"
	Commit    string // a VCS revision, "-dirty" appended if the tree had changes; "unknown" if none was recorded
	GoVersion string
}

// BuildInfo returns what the binary was built from.
func BuildInfo() Build {
	b := Build{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		if b.Commit == "" {
			b.Commit = vcsCommit(info.Settings)
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	return b
}

func vcsCommit(settings []debug.BuildSetting) string {
	var rev string
	var dirty bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty && !strings.HasSuffix(rev, "-dirty") {
		rev += "-dirty"
	}
	return rev
}
