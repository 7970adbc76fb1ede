package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

// fileTypes returns every struct type of this package that a mapping of
// the file decodes into, by its first path from the top.
func fileTypes() map[reflect.Type]string {
	types := map[reflect.Type]string{}
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || leaf(t) || t.PkgPath() != reflect.TypeFor[Config]().PkgPath() {
			return
		}
		if _, seen := types[t]; seen {
			return
		}
		types[t] = path
		for i := range t.NumField() {
			if name, ok := yamlName(t.Field(i)); ok {
				walk(t.Field(i).Type, joinPath(path, name))
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return types
}

// sample returns a value for every key under t, as YAML would write it:
// every mapping with all its keys, every list with one item.
func sample(t *testing.T, typ reflect.Type) any {
	switch {
	case typ == reflect.TypeFor[Seconds]():
		return 1
	case typ.Kind() == reflect.Pointer:
		return sample(t, typ.Elem())
	case typ.Kind() == reflect.Slice:
		return []any{sample(t, typ.Elem())}
	case typ.Kind() == reflect.Map:
		return map[string]any{"k": "v"}
	case typ.Kind() == reflect.String:
		return "x"
	case typ.Kind() == reflect.Bool:
		return true
	case typ.Kind() >= reflect.Int && typ.Kind() <= reflect.Int64:
		return 1
	case typ.Kind() == reflect.Struct && !leaf(typ):
		m := map[string]any{}
		for i := range typ.NumField() {
			if name, ok := yamlName(typ.Field(i)); ok {
				m[name] = sample(t, typ.Field(i).Type)
			}
		}
		return m
	}
	t.Fatalf("no sample value for %v: teach sample about it", typ)
	return nil
}

// unset returns the paths under v (of type Config or below) of the keys
// that were not decoded into their fields.
func unset(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return []string{path}
		}
		return unset(v.Elem(), path)
	case reflect.Slice:
		if v.Len() == 0 {
			return []string{path}
		}
		return unset(v.Index(0), path+"[0]")
	case reflect.Struct:
		if leaf(v.Type()) {
			break
		}
		var out []string
		for i := range v.NumField() {
			if name, ok := yamlName(v.Type().Field(i)); ok {
				out = append(out, unset(v.Field(i), joinPath(path, name))...)
			}
		}
		return out
	}
	if v.IsZero() {
		return []string{path}
	}
	return nil
}

// TestSectionsDeclareEveryKey holds the invariant of the split by section:
// a key is declared once, by its field in its section's type, and that
// declaration is all the loader needs. Every key of every mapping in the
// file has a default tag saying what leaving it out means and the same
// name in yaml and json; the known keys are exactly the fields and the
// section's cpex-only keys; a file setting every key decodes into every
// field without an unknown key; and the walk that defaults and checks
// reaches every section type.
func TestSectionsDeclareEveryKey(t *testing.T) {
	types := fileTypes()
	if len(types) < 15 {
		t.Fatalf("found only %d mapping types: %v", len(types), types)
	}
	sections := map[reflect.Type]bool{}
	for typ, path := range types {
		var fields []string
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, ok := yamlName(f)
			if !ok {
				continue
			}
			fields = append(fields, name)
			key := fmt.Sprintf("%s (%s.%s)", joinPath(path, name), typ.Name(), f.Name)
			if f.Tag.Get("default") == "" {
				t.Errorf("%s: no default tag: say what leaving the key out means (a value, or none, or required)", key)
			}
			if jsonName, _, _ := strings.Cut(f.Tag.Get("json"), ","); jsonName != name {
				t.Errorf("%s: json name %q is not the yaml key %q (a plugin server's config must decode too)", key, jsonName, name)
			}
		}
		cpexOnly := cpexOnlyKeys(typ)
		for _, k := range cpexOnly {
			if slices.Contains(fields, k) {
				t.Errorf("%s: cpex-only key %q is also a field", typ.Name(), k)
			}
		}
		if want := slices.Sorted(slices.Values(append(fields, cpexOnly...))); !slices.Equal(knownKeys(typ), want) {
			t.Errorf("%s: known keys %v, want the fields and cpex-only keys %v", typ.Name(), knownKeys(typ), want)
		}
		if _, ok := reflect.New(typ).Interface().(section); ok {
			sections[typ] = true
		} else if _, ok := reflect.New(typ).Interface().(cpexKeys); ok {
			t.Errorf("%s declares cpex-only keys but is not a section", typ.Name())
		}
	}

	text, err := yaml.Marshal(sample(t, reflect.TypeFor[Config]()))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		t.Fatal(err)
	}
	d := &decoder{getenv: func(string) (string, bool) { return "", false }, expanded: map[*yaml.Node]bool{}, lines: map[[2]string]int{}}
	var c Config
	d.decodeValue(doc.Content[0], reflect.ValueOf(&c).Elem(), "", "")
	for _, p := range append(d.problems, d.warnings...) {
		t.Errorf("decoding a file with every key: %v", p)
	}
	for _, path := range unset(reflect.ValueOf(c), "") {
		t.Errorf("%s: set in the file, but not decoded into its field", path)
	}

	c.ApplyDefaults()
	c.CheckWith(Options{SkipFiles: true})
	visited := map[reflect.Type]bool{}
	eachSection(&c, func(s section, at string) {
		visited[reflect.TypeOf(s).Elem()] = true
		if want := types[reflect.TypeOf(s).Elem()]; at != want && at != "plugins[0]" {
			t.Errorf("section %T walked at %q, want %q", s, at, want)
		}
	})
	for typ := range sections {
		if !visited[typ] {
			t.Errorf("section %s is never defaulted or checked: the walk does not reach it", typ.Name())
		}
	}
	if len(sections) < 7 {
		t.Errorf("found %d sections, want at least Config, PluginSettings, Plugin, Extproc, Identity, Attribution, ToolPinning", len(sections))
	}
}
