//go:build !linux

package nodeplugin

import "os/exec"

// dieWithParent does nothing here: only Linux kills a child with its
// parent; Stop ends the process otherwise.
func dieWithParent(*exec.Cmd) {}
