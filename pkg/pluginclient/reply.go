package pluginclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// maxErrorText bounds the tool error text quoted in an error.
const maxErrorText = 512

// toolJSON returns the JSON object a cpex tool answered with: the first
// TextContent block holding a JSON object (how Python servers answer), else
// structuredContent. A tool error (isError) is an error wrapping
// ErrInvalidReply that quotes the tool's text.
func toolJSON(res *mcp.CallToolResult) (json.RawMessage, error) {
	if res == nil {
		return nil, fmt.Errorf("%w: empty tool result", ErrInvalidReply)
	}
	var texts []string
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			continue
		}
		texts = append(texts, tc.Text)
		if res.IsError {
			continue
		}
		if b := bytes.TrimSpace([]byte(tc.Text)); len(b) > 0 && b[0] == '{' && json.Valid(b) {
			return b, nil
		}
	}
	if res.IsError {
		msg := strings.Join(texts, "; ")
		if len(msg) > maxErrorText {
			msg = msg[:maxErrorText] + "…"
		}
		return nil, fmt.Errorf("%w: tool error: %s", ErrInvalidReply, msg)
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err == nil && len(b) > 0 && b[0] == '{' {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%w: no JSON object in tool result", ErrInvalidReply)
}

// parseInvokeReply decodes an invoke_hook result. A reply with neither result
// nor error is ErrInvalidReply; a reply with error is returned as is.
func parseInvokeReply(res *mcp.CallToolResult) (*cpex.InvokeHookReply, error) {
	raw, err := toolJSON(res)
	if err != nil {
		return nil, err
	}
	var reply cpex.InvokeHookReply
	if err := json.Unmarshal(raw, &reply); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidReply, err)
	}
	if reply.Result == nil && reply.Error == nil {
		return nil, fmt.Errorf("%w: neither result nor error", ErrInvalidReply)
	}
	return &reply, nil
}

// errNoConfig is the reference client's error for an empty get_plugin_config
// answer.
var errNoConfig = errors.New("unable to retrieve configuration")

// remotePlugin is a cpex PluginConfig as get_plugin_config returns it. The
// server's own transport settings ("mcp", "grpc", "unix_socket") are not
// ours: they are kept raw and ignored, so that their shape can never fail
// the decode.
type remotePlugin struct {
	config.Plugin
	MCP        json.RawMessage `json:"mcp"`
	GRPC       json.RawMessage `json:"grpc"`
	UnixSocket json.RawMessage `json:"unix_socket"`
}

// configJSON returns the JSON object of a get_plugin_config result and
// whether the server knows the plugin (cpex answers an unknown name with an
// empty object).
func configJSON(res *mcp.CallToolResult) (json.RawMessage, bool, error) {
	raw, err := toolJSON(res)
	if err != nil {
		return nil, false, err
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrInvalidReply, err)
	}
	return raw, len(probe) > 0, nil
}

// decodeRemoteConfig decodes a get_plugin_config answer (found: the server
// knows the plugin).
func decodeRemoteConfig(raw json.RawMessage, found bool) (config.Plugin, error) {
	if !found {
		return config.Plugin{}, errNoConfig
	}
	var rp remotePlugin
	if err := json.Unmarshal(raw, &rp); err != nil {
		return config.Plugin{}, fmt.Errorf("%w: plugin config: %v", ErrInvalidReply, err)
	}
	return rp.Plugin, nil
}

// merge applies the reference client's rule (docs/plugin-protocol.md, start-up sequence): the
// remote config, then every key set in the local config overrides it
// (shallow). "Set" means non-empty for strings, non-nil for pointers, slices
// and maps. Name, kind and the transport (mcp, grpc, unix_socket) always
// come from the local config. The
// remote mode is normalised as the loader normalises local ones (legacy
// names; enforce_ignore_error implies on_error ignore unless on_error is
// set); an unknown mode is kept for the executor to treat strictly.
func merge(local, remote config.Plugin) config.Plugin {
	out := remote
	out.Name, out.Kind = local.Name, local.Kind
	out.MCP, out.GRPC, out.UnixSocket = local.MCP, local.GRPC, local.UnixSocket
	if out.Mode != "" {
		raw := config.Mode(strings.ToLower(strings.TrimSpace(string(out.Mode))))
		if raw == config.LegacyModeEnforceIgnoreError && out.OnError == "" {
			out.OnError = config.OnErrorIgnore
		}
		out.Mode, _ = raw.Canonical()
	}
	if out.OnError != "" {
		out.OnError, _ = out.OnError.Canonical()
	}

	if local.Description != "" {
		out.Description = local.Description
	}
	if local.Author != "" {
		out.Author = local.Author
	}
	if local.Version != "" {
		out.Version = local.Version
	}
	if local.Tags != nil {
		out.Tags = local.Tags
	}
	if local.Hooks != nil {
		out.Hooks = local.Hooks
	}
	if local.Mode != "" {
		out.Mode = local.Mode
	}
	if local.Priority != nil {
		out.Priority = local.Priority
	}
	if local.OnError != "" {
		out.OnError = local.OnError
	}
	if local.Conditions != nil {
		out.Conditions = local.Conditions
	}
	if local.AppliedTo != nil {
		out.AppliedTo = local.AppliedTo
	}
	if local.Config != nil {
		out.Config = local.Config
	}
	return out
}
