// Package wireconn is what the plugin connections of the protobuf
// transports (gRPC in grpcconn, the raw Unix socket in unixconn) have in
// common: the four methods a caller uses, the errors they report, and the
// request and reply conversions both make around their own round trip.
//
// Neither transport has a session: a plugin server restart is a broken
// connection, and reconnecting is all the recovery needed. Both report a
// call that got no answer from the wire (connection refused, reset, closed
// before the reply) with an error wrapping [ErrConnLost], and retry such a
// call once on a fresh connection before reporting it. A reply that cannot
// be decoded wraps [cpex.ErrInvalidReply]. A reply the plugin sends with
// its error field set is not an error of these methods: it is in
// [cpex.InvokeHookReply.Error].
package wireconn

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Conn is one connection to a plugin server, whatever the transport: the
// gRPC and Unix-socket connections implement it, and so does the MCP
// session of package pluginclient, whose Conn it is.
type Conn interface {
	// PluginConfig returns the config (a JSON object) of the named plugin,
	// as the server looks it up, and whether the server knows it.
	PluginConfig(ctx context.Context, name string) (cfg json.RawMessage, found bool, err error)
	// InvokeHook runs one hook of one plugin, once.
	InvokeHook(ctx context.Context, hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error)
	// Health reports whether the plugin server answers (cpex.Health/Check
	// on gRPC; a config listing on the Unix socket; an MCP ping).
	Health(ctx context.Context) error
	// Close releases the connection; later calls fail (with ErrClosed on
	// the protobuf transports).
	Close() error
}

// ErrConnLost is wrapped by errors of calls that got no answer from the
// wire: the server refused or reset the connection, or it closed before
// the reply. The call may not have reached the plugin.
var ErrConnLost = errors.New("plugin connection lost")

// ErrClosed is returned by calls on a closed Conn.
var ErrClosed = errors.New("plugin connection closed")
