// Package config is the configuration model of mcp-extproc: the cpex /
// ContextForge plugin YAML that users already write (plugins, plugin_settings),
// plus the sidecar's own settings under the extra top-level key "extproc".
// See docs/plugin-protocol.md §4.
//
// [Load] and [Parse] read a file the way the Python loader does (environment
// references expanded, legacy modes normalised), apply defaults and validate
// everything at once: the error is a [*ValidationError] that lists every
// problem with the plugin and field it concerns. Keys this program does not
// know (cpex has more, and grows) never fail a load; they are reported in
// [Config.Warnings].
//
// Plugin-level fields that the plugin server may supply (hooks, mode,
// priority, on_error, conditions) are left unset when the file does not set
// them, because the local file only overrides the keys it sets
// (plugin-protocol.md §1.3); use the Effective* accessors to read them with
// defaults applied.
//
// The structs carry json tags with the same names as the yaml tags, so the
// plugin config a server returns from get_plugin_config decodes into [Plugin].
//
// # Where things are
//
// The file is split by section: each section's file holds its type (whose
// yaml tags are its keys, each with a default tag saying what leaving it
// out means), its defaults, its checks and the cpex-only keys it accepts:
//
//   - file.go: the top level (plugins, plugin_dirs, server_settings) and
//     plugin_settings.
//   - plugin.go: one entry of plugins, its conditions and its transports
//     (mcp, grpc, unix_socket, and their tls); builtin.go: its kind (the
//     built-in plugins, isolated_venv).
//   - extproc.go: the extproc section's own keys (paths, body bound,
//     headers, hook_timeout, plugin_sessions, ...); rules.go: extproc.rules.
//   - identity.go: extproc.identity (claimpath.go: its claim paths).
//   - attribution.go: extproc.attribution and its redis block.
//   - pinning.go: extproc.tool_pinning.
//
// The machinery they share: section.go (the section interface, the walk
// that defaults and checks every section, ApplyDefaults and Check),
// load.go (Load, Parse), decode.go (YAML decoding with positions, unknown
// keys), keys.go (the known keys, derived from the types), expand.go
// (environment references), problem.go and suggest.go (problems, "did you
// mean"), validate.go (the validator and checks several sections use),
// seconds.go (durations in seconds).
//
// To add a section, say extproc.audit: write audit.go with its type (yaml,
// json and default tags on every field) and its setDefaults and check
// methods, and add its field to the parent's struct (Extproc). The walk
// finds it by its type; its keys are known from its tags.
package config
