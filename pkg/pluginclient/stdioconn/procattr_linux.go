package stdioconn

import "syscall"

// sysProcAttr puts the child in a process group of its own (so that it and
// everything it starts are stopped together) and has the kernel kill it if
// the sidecar dies without stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
