package sidecar

import (
	"context"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
)

// inProcess sets opts so that the client of a built-in plugin (p.Builtin)
// calls the plugin in this process instead of a plugin server: one slot
// whose connection is the plugin itself. The executor, metrics and spans
// see it as any other plugin, except that the executor calls one which
// cannot block directly, with no timer per call: inProcess returns it as
// local (see executor.NonBlocking). Other plugins are left as they are.
func inProcess(p config.Plugin, opts *pluginclient.Options) (local executor.LocalPlugin, err error) {
	if !p.Builtin() {
		return nil, nil
	}
	conn, err := builtin.Open(p.Name, p.Kind, p.Config)
	if err != nil {
		return nil, err
	}
	opts.Dialer = func(context.Context) (pluginclient.Conn, error) { return conn, nil }
	opts.Slots = 1
	if conn.NonBlocking() {
		return conn, nil
	}
	return nil, nil
}

// NonBlocking implements executor.NonBlocking: the built-in plugins that
// only compute.
func (s *pluginSet) NonBlocking(plugin string) executor.LocalPlugin { return s.nonBlocking[plugin] }

// allBuiltin reports whether every plugin runs in this process (none is
// reached over a transport); true for none.
func allBuiltin(plugins []config.Plugin) bool {
	for _, p := range plugins {
		if !p.Builtin() {
			return false
		}
	}
	return true
}
