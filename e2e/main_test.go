package e2e_test

import (
	"os"
	"testing"
)

// TestMain removes the binaries the tests built (see binaries).
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}
