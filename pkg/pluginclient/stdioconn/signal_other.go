//go:build !unix

package stdioconn

import (
	"os"
	"syscall"
)

// sysProcAttr is nil where process groups do not exist.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup kills the child itself where process groups do not exist
// (every signal is a kill there).
func signalGroup(pid int, _ syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	_ = p.Kill()
	return nil
}

// groupExists is false where process groups do not exist.
func groupExists(int) bool { return false }
