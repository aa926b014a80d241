package httpapi_test

import (
	"testing"

	"redpacket/internal/testenv"
)

// TestMain fails the package when a test leaves a goroutine running.
func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }
