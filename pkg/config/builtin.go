package config

import (
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin"
)

// Builtin reports whether the sidecar runs p in its own process: its kind
// is the class path of a built-in plugin (docs/builtin-plugins.md).
func (p *Plugin) Builtin() bool { return builtin.Known(p.Kind) }

// External reports whether p is reached as an external plugin: kind
// external, or a kind the sidecar cannot run in-process (a class path)
// with a transport section to reach the plugin server that runs it.
func (p *Plugin) External() bool {
	return p.Kind == KindExternal || (isClassPath(p.Kind) && !p.Builtin() && p.hasTransport())
}

// isClassPath reports whether kind names a Python class (module.Class), as
// opposed to one of cpex's kind words (external, native, wasm, ...).
func isClassPath(kind string) bool { return strings.Contains(kind, ".") }

func (p *Plugin) hasTransport() bool { return p.MCP != nil || p.GRPC != nil || p.UnixSocket != nil }

// kind checks p's kind, and the config: block and hooks of a built-in
// plugin. It reports whether p is an external plugin, whose transport is
// then checked.
func (v *validator) kind(p *Plugin, label string, field func(string) string) (external bool) {
	switch {
	case p.Kind == KindExternal:
		return true
	case p.Kind == "":
		v.problem(label, field("kind"), `required: "external", or the class path of a built-in plugin (%s)`, builtin.Names())
		return false
	case p.Builtin():
		for _, is := range builtin.Check(p.Kind, p.Hooks, p.Config) {
			if is.Warning {
				v.warn(label, field(is.Field), "%s", is.Message)
			} else {
				v.problem(label, field(is.Field), "%s", is.Message)
			}
		}
		if p.hasTransport() {
			v.warn(label, field("kind"), "%q runs in the sidecar's process: its transport section is ignored (kind: external to call a plugin server instead)", p.Kind)
		}
		return false
	case p.Kind == KindIsolatedVenv:
		v.isolatedVenv(p, label, field)
		return false
	case !isClassPath(p.Kind):
		v.problem(label, field("kind"), "unsupported kind %q: the sidecar runs external plugins and the class paths of its built-in plugins (%s)%s",
			p.Kind, builtin.Names(), didYouMean(p.Kind, []string{KindExternal}))
		return false
	case p.hasTransport():
		v.warn(label, field("kind"), "%q is not a built-in plugin (%s): it is called as an external plugin through its transport section", p.Kind, builtin.Names())
		if len(p.Config) > 0 {
			v.warn(label, field("config"), "ignored: the plugin server holds the config of an external plugin")
		}
		return true
	}
	v.problem(label, field("kind"), "%q cannot run in the sidecar: it is not a built-in plugin (%s), and without an mcp, grpc or unix_socket section there is no plugin server to call%s",
		p.Kind, builtin.Names(), didYouMean(p.Kind, builtinKinds()))
	return false
}

// KindIsolatedVenv is the kind cpex 0.1.4's plugin installer writes for a
// class-path plugin it runs in its own virtualenv (a stdio JSON worker,
// the class in config.class_name). The sidecar cannot run it: --check-config
// says what to write instead.
const KindIsolatedVenv = "isolated_venv"

// isolatedVenv answers a kind: isolated_venv entry with what to do
// instead: the built-in class path when config.class_name names a built-in
// plugin, else an external plugin server for the class.
func (v *validator) isolatedVenv(p *Plugin, label string, field func(string) string) {
	class, _ := p.Config["class_name"].(string)
	class = strings.TrimSpace(class)
	switch {
	case class == "":
		v.problem(label, field("config.class_name"), "required with kind isolated_venv (cpex's installer writes the plugin's class path there); the sidecar cannot run an isolated_venv worker: use kind: external with an mcp section for the plugin's server")
	case builtin.Known(class):
		v.problem(label, field("kind"), "the sidecar cannot run an isolated_venv worker, but %s is built in: write kind: %s, without config.class_name (the rest of config: is the plugin's own), to run it in the sidecar's process", class, class)
	default:
		v.problem(label, field("kind"), "the sidecar cannot run an isolated_venv worker, and %s is not a built-in plugin (%s): serve it with cpex's MCP plugin server runtime and write kind: external with mcp: {proto: STDIO, cmd: [<command that starts the server>]} (same Pod) or mcp: {proto: STREAMABLEHTTP, url: http://<host>:<port>/mcp}; see docs/plugin-transports.md", class, builtin.Names())
	}
}

// builtinKinds lists every class path the sidecar runs in-process, and
// "external", for suggestions.
func builtinKinds() []string {
	kinds := []string{KindExternal}
	for _, s := range builtin.Specs() {
		kinds = append(kinds, s.Kinds...)
	}
	return kinds
}
