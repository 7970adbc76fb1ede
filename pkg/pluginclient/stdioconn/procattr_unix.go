//go:build unix && !linux

package stdioconn

import "syscall"

// sysProcAttr puts the child in a process group of its own, so that it and
// everything it starts are stopped together.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
