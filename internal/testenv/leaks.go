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
func VerifyNoLeaks(m *testing.M) { goleak.VerifyTestMain(m) }
