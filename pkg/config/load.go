package config

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads the file at path and returns it parsed, expanded, defaulted and
// validated (see [Parse]), with the process environment. A file that cannot
// be read gives the wrapped os error; any other failure is a
// [*ValidationError] listing every problem.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load config: %w", err)
	}
	return Parse(data, os.LookupEnv)
}

// Parse turns a configuration file into a [Config]: environment references
// are expanded with getenv (nil: none are set), the YAML is decoded,
// [Config.ApplyDefaults] runs, then [Config.Check]. Unknown keys and other
// notes go to Config.Warnings. On any problem Parse returns a
// [*ValidationError] listing all of them, and no Config.
func Parse(data []byte, getenv func(string) (string, bool)) (*Config, error) {
	if getenv == nil {
		getenv = func(string) (string, bool) { return "", false }
	}
	text, problems := expandJinja(string(data), getenv)
	d := &decoder{getenv: getenv, expanded: map[*yaml.Node]bool{}, problems: problems}

	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		d.problems = append(d.problems, Problem{Message: strings.TrimPrefix(err.Error(), "yaml: ")})
		return nil, &ValidationError{Problems: d.problems}
	}
	c := &Config{}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind != 0 && root.Kind != yaml.DocumentNode {
		d.decodeValue(root, reflect.ValueOf(c).Elem(), "", "")
	}
	c.ApplyDefaults()
	problems, warnings := c.Check()
	c.Warnings = append(d.warnings, warnings...)
	// A field that did not decode is reported once, not again by Check.
	failed := map[[2]string]bool{}
	for _, p := range d.problems {
		failed[[2]string{p.Plugin, p.Field}] = true
	}
	problems = slices.DeleteFunc(problems, func(p Problem) bool { return failed[[2]string{p.Plugin, p.Field}] })
	problems = append(d.problems, problems...)
	sortByPlugin(c, problems)
	if len(problems) > 0 {
		return nil, &ValidationError{Problems: problems, Warnings: c.Warnings}
	}
	return c, nil
}

// decoder decodes a YAML node tree into the config structs field by field,
// so that every problem is reported with its plugin and field, unknown keys
// become warnings instead of errors, and ${...} references are expanded in
// the scalars that are actually used.
type decoder struct {
	getenv   func(string) (string, bool)
	expanded map[*yaml.Node]bool
	problems []Problem
	warnings []Problem
}

var (
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	pluginType      = reflect.TypeFor[Plugin]()
)

func (d *decoder) problem(plugin, path, format string, args ...any) {
	d.problems = append(d.problems, Problem{Plugin: plugin, Field: path, Message: fmt.Sprintf(format, args...)})
}

func (d *decoder) warn(plugin, path, format string, args ...any) {
	d.warnings = append(d.warnings, Problem{Plugin: plugin, Field: path, Message: fmt.Sprintf(format, args...)})
}

// leaf reports whether values of type t are decoded by yaml itself rather
// than walked key by key.
func leaf(t reflect.Type) bool {
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct:
		return false
	case reflect.Pointer, reflect.Slice:
		return leaf(t.Elem())
	}
	return true
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// decodeValue decodes n into v, reporting problems at plugin/path.
func (d *decoder) decodeValue(n *yaml.Node, v reflect.Value, plugin, path string) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if isNull(n) {
		return
	}
	t := v.Type()
	switch {
	case leaf(t):
		if err := d.expandTree(n); err != nil {
			d.problem(plugin, path, "line %d: %v", n.Line, err)
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			d.problem(plugin, path, "%s", yamlMessage(err))
		}
	case t.Kind() == reflect.Struct:
		d.decodeStruct(n, v, plugin, path)
	case t.Kind() == reflect.Pointer:
		nv := reflect.New(t.Elem())
		d.decodeValue(n, nv.Elem(), plugin, path)
		v.Set(nv)
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.problem(plugin, path, "line %d: want a list, got a %s", n.Line, kindName(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			if t.Elem() == pluginType {
				d.decodePlugin(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
				continue
			}
			d.decodeValue(item, s.Index(i), plugin, fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	}
}

// decodePlugin decodes one entry of "plugins"; its problems carry its name.
func (d *decoder) decodePlugin(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	name := ""
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == "name" && n.Content[i+1].Kind == yaml.ScalarNode {
				if s, err := expandVars(n.Content[i+1].Value, d.getenv); err == nil {
					name = strings.TrimSpace(s)
				}
			}
		}
	}
	if name == "" {
		d.decodeValue(n, v, "", path)
		return
	}
	d.decodeValue(n, v, name, "")
}

// decodeStruct decodes a mapping into a struct, key by key.
func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, plugin, path string) {
	if n.Kind != yaml.MappingNode {
		d.problem(plugin, path, "line %d: want a mapping, got a %s", n.Line, kindName(n))
		return
	}
	fields := yamlFields(v.Type())
	// Merge keys ("<<: *base") first, so explicit keys override them.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			val := n.Content[i+1]
			if val.Kind == yaml.AliasNode && val.Alias != nil {
				val = val.Alias
			}
			if val.Kind == yaml.SequenceNode {
				for _, m := range val.Content {
					d.decodeValue(m, v, plugin, path)
				}
				continue
			}
			d.decodeValue(val, v, plugin, path)
		}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			continue
		}
		key := k.Value
		field := joinPath(path, key)
		if seen[key] {
			d.problem(plugin, field, "line %d: key given twice", k.Line)
			continue
		}
		seen[key] = true
		idx, ok := fields[key]
		if !ok {
			d.warn(plugin, field, "unknown key, ignored (line %d)", k.Line)
			continue
		}
		d.decodeValue(val, v.Field(idx), plugin, field)
	}
}

// yamlFields maps the yaml key names of a struct type to field indexes.
func yamlFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = i
	}
	return m
}

// expandTree expands ${...} in every scalar under n, once per node. A plain
// scalar is re-typed after expansion, so "${N}" can become an int.
func (d *decoder) expandTree(n *yaml.Node) error {
	if n == nil || d.expanded[n] {
		return nil
	}
	d.expanded[n] = true
	switch n.Kind {
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return nil
		}
		s, err := expandVars(n.Value, d.getenv)
		if err != nil {
			return err
		}
		n.Value = s
		if n.Style == 0 { // plain, untagged: resolve the type anew
			n.Tag = ""
		}
	case yaml.AliasNode:
		return d.expandTree(n.Alias)
	default:
		for _, c := range n.Content {
			if err := d.expandTree(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// yamlMessage turns a yaml decoding error into one line.
func yamlMessage(err error) string {
	if te, ok := err.(*yaml.TypeError); ok {
		return strings.Join(te.Errors, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// sortByPlugin orders problems by the position of their plugin in the file,
// settings outside plugins last, keeping the order within each.
func sortByPlugin(c *Config, problems []Problem) {
	pos := map[string]int{}
	for i, p := range c.Plugins {
		if _, dup := pos[p.Name]; !dup && p.Name != "" {
			pos[p.Name] = i
		}
	}
	rank := func(p Problem) int {
		if p.Plugin != "" {
			if i, ok := pos[p.Plugin]; ok {
				return i
			}
		}
		var i int
		if _, err := fmt.Sscanf(p.Field, "plugins[%d]", &i); err == nil {
			return i
		}
		if p.Field == "" {
			return -1 // the file as a whole comes first
		}
		return len(c.Plugins)
	}
	slices.SortStableFunc(problems, func(a, b Problem) int { return rank(a) - rank(b) })
}
