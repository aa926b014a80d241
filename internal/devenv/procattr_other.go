//go:build !linux

package devenv

import "syscall"

// daemonProcAttr: elsewhere than Linux a daemon outlives this process if it
// dies without stopping it.
func daemonProcAttr() *syscall.SysProcAttr { return nil }
