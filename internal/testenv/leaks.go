package testenv

import (
	"testing"

	"go.uber.org/goleak"
)

// VerifyNoLeaks runs a package's tests and then fails the package when a
// goroutine a test started is still running: a component that does not stop
// on shutdown. Call it as the package's TestMain:
//
//	func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }
//
// The throwaway servers' supervisor (when no server was given and a test
// started its own) lives as long as the process, by design: its reader is
// not counted.
func VerifyNoLeaks(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("redpacket/internal/testenv/throwaway.startSupervisor.func1"))
}
