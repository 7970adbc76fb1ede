package config

import (
	"reflect"
	"slices"
)

// cpexOnlyKeys returns the keys cpex defines in the mapping that decodes
// into the struct type t but that the sidecar has no field for, as the
// section declares them (see [cpexKeys]): they load without a warning.
func cpexOnlyKeys(t reflect.Type) []string {
	if s, ok := reflect.New(t).Interface().(cpexKeys); ok {
		return s.cpexOnlyKeys()
	}
	return nil
}

// knownKeys returns every key a mapping decoding into t may hold, sorted:
// its fields' yaml names and the cpex-only keys. An unknown key is
// compared with these for a "did you mean".
func knownKeys(t reflect.Type) []string {
	keys := slices.Clone(cpexOnlyKeys(t))
	for k := range yamlFields(t) {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
