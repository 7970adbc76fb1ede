package plugintest

import (
	"errors"
	"os"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/nodeplugin"
)

// NeedNode skips t, with one line saying why, unless the TypeScript SDK
// plugin server can run (node on the PATH, npm dependencies installed:
// make test runs npm ci). Under CI, with node present but the dependencies
// missing, it fails instead: a suite must not pass by skipping.
func NeedNode(t testing.TB) {
	t.Helper()
	err := nodeplugin.Check()
	if err == nil {
		return
	}
	if errors.Is(err, nodeplugin.ErrNotInstalled) && os.Getenv("CI") != "" {
		t.Fatal(err)
	}
	t.Skip(err)
}

// NodeServer is the TypeScript SDK plugin server (package nodeplugin), a
// real Node.js process, owned by a test.
type NodeServer struct {
	*nodeplugin.Server
	t testing.TB
}

// StartNode starts the Node.js plugin server on a free loopback port and
// kills it in t.Cleanup. It skips t when node is not available (NeedNode).
func StartNode(t testing.TB, opts nodeplugin.Options) *NodeServer {
	t.Helper()
	NeedNode(t)
	s, err := nodeplugin.Start(opts)
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	t.Cleanup(s.Stop)
	return &NodeServer{Server: s, t: t}
}

// Restart kills the process and starts it again on the same port; a
// failure is reported with t.Errorf.
func (n *NodeServer) Restart() {
	if err := n.Server.Restart(); err != nil {
		n.t.Errorf("plugintest: node restart: %v", err)
	}
}

// Totals returns the counts over every process so far; a failure fails t.
func (n *NodeServer) Totals() nodeplugin.Stats {
	n.t.Helper()
	st, err := n.Server.Totals()
	if err != nil {
		n.t.Fatalf("plugintest: %v", err)
	}
	return st
}

// Traces returns the trace context each invoke_hook carried to the current
// process, oldest first; a failure fails t.
func (n *NodeServer) Traces() []nodeplugin.Trace {
	n.t.Helper()
	tr, err := n.Server.Traces()
	if err != nil {
		n.t.Fatalf("plugintest: %v", err)
	}
	return tr
}
