package nodeplugin

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the Node.js process when the Go
// process that started it dies, so that a test binary killed on timeout
// leaves no plugin server behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
