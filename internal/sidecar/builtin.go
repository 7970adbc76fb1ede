package sidecar

import (
	"context"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient"
)

// inProcess sets opts so that the client of a built-in plugin (p.Builtin)
// calls the plugin in this process instead of a plugin server: one slot
// whose connection is the plugin itself. The executor, metrics and spans
// see it as any other plugin. Other plugins are left as they are.
func inProcess(p config.Plugin, opts *pluginclient.Options) error {
	if !p.Builtin() {
		return nil
	}
	conn, err := builtin.Open(p.Name, p.Kind, p.Config)
	if err != nil {
		return err
	}
	opts.Dialer = func(context.Context) (pluginclient.Conn, error) { return conn, nil }
	opts.Slots = 1
	return nil
}
