package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// A section is one mapping of the file that owns its keys, in one file of
// this package: its struct type declares the keys (the yaml tags, which are
// also the known keys an unknown key is compared with, and a default tag
// saying what leaving each key out means), setDefaults fills them in and
// check validates them. A section is found by its type: any field of the
// configuration, at any depth, whose type implements section is defaulted
// and checked, so adding one is writing its file and adding its field to
// the parent's struct. A mapping inside a section that is not one itself
// (a plugin's mcp, a redis block) is defaulted and checked by the section
// that holds it.
type section interface {
	// setDefaults normalises the section and fills in its defaults. It
	// runs after the sections before it in the file (plugins, then
	// plugin_settings, then extproc) and before the sections inside it, and
	// must be idempotent.
	setDefaults(c *Config)
	// check reports the section's problems and warnings; at is its path in
	// the file ("extproc.attribution", "plugins[2]"). It runs after its
	// parent's check and before the sections inside it.
	check(v *validator, c *Config, at string)
}

// cpexKeys is implemented by the sections in which cpex defines keys that
// the sidecar has no field for: they are accepted without a warning and
// ignored, so a file written for ContextForge checks clean.
type cpexKeys interface {
	cpexOnlyKeys() []string
}

// eachSection calls fn for every section of c, in the order of the file's
// fields, a section before the ones inside it. Nil pointers are skipped: a
// section that is not in the file has nothing to default or check.
func eachSection(c *Config, fn func(s section, at string)) {
	walkSections(reflect.ValueOf(c).Elem(), "", fn)
}

func walkSections(v reflect.Value, at string, fn func(section, string)) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			walkSections(v.Elem(), at, fn)
		}
	case reflect.Slice:
		for i := range v.Len() {
			walkSections(v.Index(i), fmt.Sprintf("%s[%d]", at, i), fn)
		}
	case reflect.Struct:
		t := v.Type()
		if leaf(t) {
			return
		}
		if s, ok := v.Addr().Interface().(section); ok {
			fn(s, at)
		}
		for i := range t.NumField() {
			if name, ok := yamlName(t.Field(i)); ok {
				walkSections(v.Field(i), joinPath(at, name), fn)
			}
		}
	}
}

// ApplyDefaults normalises c and fills in the defaults that do not depend on
// the plugin server: legacy modes become cpex modes (enforce_ignore_error
// also sets on_error: ignore unless on_error is set, as cpex does), mode,
// on_error and proto are case-normalised, "~/" in TLS paths is expanded,
// header names are lower-cased; plugin_settings, mcp and extproc get their
// defaults. Plugin-level keys the plugin server may supply (hooks, mode,
// priority, on_error, conditions) stay unset when unset: read them with the
// Effective* accessors. ApplyDefaults is idempotent.
func (c *Config) ApplyDefaults() {
	eachSection(c, func(s section, _ string) { s.setDefaults(c) })
}

// Validate returns every problem of c (nil when it is usable). It checks c
// as it is: call [Config.ApplyDefaults] first for a config built in code.
// TLS files are opened, so validation sees what the process can read now
// (see [Options.SkipFiles] to check without them).
func (c *Config) Validate() []Problem {
	problems, _ := c.Check()
	return problems
}

// Check returns every problem of c and the warnings about it: settings that
// load but are ignored here or look like mistakes. See [Config.Validate].
func (c *Config) Check() (problems, warnings []Problem) { return c.CheckWith(Options{}) }

// CheckWith is [Config.Check] with options.
func (c *Config) CheckWith(o Options) (problems, warnings []Problem) {
	v := &validator{opts: o}
	eachSection(c, func(s section, at string) { s.check(v, c, at) })
	return v.problems, v.warnings
}

// choice is a setting that takes one of a few words.
type choice struct {
	field  string   // its path in the file, for problems
	value  *string  // lower-cased by setDefault
	values []string // the allowed words; values[0] is the default
}

// setDefault trims and lower-cases the word, or sets the default.
func (ch choice) setDefault() {
	if *ch.value = strings.ToLower(strings.TrimSpace(*ch.value)); *ch.value == "" {
		*ch.value = ch.values[0]
	}
}

// choices checks settings that take one of a few words (after defaults).
func (v *validator) choices(chs ...choice) {
	for _, ch := range chs {
		if w := *ch.value; w != "" && !slices.Contains(ch.values, w) {
			v.problem("", ch.field, "must be %s, got %q%s", quotedOr(ch.values), w, didYouMean(w, ch.values))
		}
	}
}

func ptr[T any](v T) *T { return &v }

func lowerHeader(h string) string { return strings.ToLower(strings.TrimSpace(h)) }

// expandHome expands a leading "~/" as Python's Path.expanduser does.
func expandHome(p string) string {
	rest, ok := strings.CutPrefix(p, "~/")
	if !ok {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	return filepath.Join(home, rest)
}
