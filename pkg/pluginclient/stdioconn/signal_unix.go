//go:build unix

package stdioconn

import (
	"errors"
	"syscall"
)

// signalGroup sends sig to the process group led by pid (the child and
// whatever it started). A group that no longer exists is not an error.
func signalGroup(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// groupExists reports whether a process of the group led by pid is left
// (zombies included: a killed grandchild whose parent is gone waits for
// PID 1 to reap it).
func groupExists(pid int) bool {
	return syscall.Kill(-pid, 0) == nil
}
