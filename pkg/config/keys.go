package config

import (
	"reflect"
	"slices"
)

// cpexOnlyKeys returns the keys cpex defines in the mapping that decodes
// into the struct type t, but that the sidecar has no field for: they are
// accepted without a warning and ignored, so a file written for
// ContextForge checks clean. The keys the sidecar reads are the yaml tags
// of the structs in config.go (see [knownKeys]); the lists below complete
// them with the rest of cpex's configuration model (docs/plugin-protocol.md
// §4): the top-level server_settings of a plugin server's own file, a
// plugin's namespace, and plugin_settings.enable_plugin_api (the gateway's
// plugin admin API).
func cpexOnlyKeys(t reflect.Type) []string {
	switch t {
	case reflect.TypeFor[Config]():
		return []string{"server_settings"}
	case reflect.TypeFor[Plugin]():
		return []string{"namespace"}
	case reflect.TypeFor[PluginSettings]():
		return []string{"enable_plugin_api"}
	}
	return nil
}

// knownKeys returns every key a mapping decoding into t may hold, sorted:
// its fields' yaml names and the cpex-only keys. An unknown key is
// compared with these for a "did you mean".
func knownKeys(t reflect.Type) []string {
	keys := cpexOnlyKeys(t)
	for k := range yamlFields(t) {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
