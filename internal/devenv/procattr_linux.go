package devenv

import "syscall"

// daemonProcAttr: a daemon gets SIGTERM should this process die without
// stopping it (killed with SIGKILL, say), rather than run on alone.
func daemonProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
