package pluginclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

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
// set); an unknown mode is kept for the executor to treat strictly. Hook
// aliases become their hooks, as the loader maps them.
func merge(local, remote config.Plugin) config.Plugin {
	out := remote
	out.Name, out.Kind = local.Name, local.Kind
	out.MCP, out.GRPC, out.UnixSocket = local.MCP, local.GRPC, local.UnixSocket
	// A server may report cpex's other names for a hook (cmf.tool_pre_invoke,
	// prompt_pre_invoke): they run as the hook the loader maps them to.
	out.Hooks = cpex.CanonicalHooks(out.Hooks)
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
