package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"
)

// decoder decodes a YAML node tree into the config structs field by field,
// so that every problem is reported with its plugin and field, unknown keys
// become warnings instead of errors, and ${...} references are expanded in
// the scalars that are actually used.
type decoder struct {
	getenv   func(string) (string, bool)
	expanded map[*yaml.Node]bool
	problems []Problem
	warnings []Problem
	// lines maps {plugin, field} to the line of its key (or list item), for
	// the problems found after decoding (see locate).
	lines map[[2]string]int
}

var (
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	pluginType      = reflect.TypeFor[Plugin]()
)

func (d *decoder) problem(plugin, path string, line int, format string, args ...any) {
	d.problems = append(d.problems, Problem{Plugin: plugin, Field: path, Line: line, Message: fmt.Sprintf(format, args...)})
}

func (d *decoder) warn(plugin, path string, line int, format string, args ...any) {
	d.warnings = append(d.warnings, Problem{Plugin: plugin, Field: path, Line: line, Message: fmt.Sprintf(format, args...)})
}

// at records the line of plugin/path; the first record wins (a plugin name
// given twice keeps the first entry's lines, as sortByPlugin does).
func (d *decoder) at(plugin, path string, line int) {
	k := [2]string{plugin, path}
	if _, ok := d.lines[k]; !ok && line > 0 {
		d.lines[k] = line
	}
}

// locate gives every problem of ps that has no line the line of its field,
// or of the nearest enclosing key that has one: "hooks[3]" of a flow list
// falls back to "hooks", a plugin-level problem to the plugin's entry.
func (d *decoder) locate(ps []Problem) {
	for i := range ps {
		p := &ps[i]
		for f := p.Field; p.Line == 0; f = parentPath(f) {
			p.Line = d.lines[[2]string{p.Plugin, f}]
			if f == "" {
				break
			}
		}
	}
}

// parentPath drops the last element of a field path: "mcp.tls.keyfile" →
// "mcp.tls", "hooks[2]" → "hooks", "name" → "".
func parentPath(f string) string {
	if i := strings.LastIndexAny(f, ".["); i >= 0 {
		return f[:i]
	}
	return ""
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
		if n.Kind == yaml.SequenceNode {
			for i, item := range n.Content {
				d.at(plugin, fmt.Sprintf("%s[%d]", path, i), item.Line)
			}
		}
		if err := d.expandTree(n); err != nil {
			d.problem(plugin, path, n.Line, "%v", err)
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			line, msg := yamlMessage(err)
			if line == 0 {
				line = n.Line
			}
			d.problem(plugin, path, line, "%s", msg)
		}
	case t.Kind() == reflect.Struct:
		d.decodeStruct(n, v, plugin, path)
	case t.Kind() == reflect.Pointer:
		nv := reflect.New(t.Elem())
		d.decodeValue(n, nv.Elem(), plugin, path)
		v.Set(nv)
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.problem(plugin, path, n.Line, "want a list, got a %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.at(plugin, fmt.Sprintf("%s[%d]", path, i), item.Line)
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
	d.at(name, "", n.Line)
	d.decodeValue(n, v, name, "")
}

// decodeStruct decodes a mapping into a struct, key by key.
func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, plugin, path string) {
	if n.Kind != yaml.MappingNode {
		d.problem(plugin, path, n.Line, "want a mapping, got a %s", kindName(n))
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
			d.problem(plugin, field, k.Line, "key given twice")
			continue
		}
		seen[key] = true
		d.at(plugin, field, k.Line)
		idx, ok := fields[key]
		if !ok {
			if !slices.Contains(cpexOnlyKeys(v.Type()), key) {
				d.warn(plugin, field, k.Line, "unknown key, ignored%s", didYouMean(key, knownKeys(v.Type())))
			}
			continue
		}
		d.decodeValue(val, v.Field(idx), plugin, field)
	}
}

// yamlFields maps the yaml key names of a struct type to field indexes.
func yamlFields(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		if name, ok := yamlName(t.Field(i)); ok {
			m[name] = i
		}
	}
	return m
}

// yamlName returns the key of a struct field in the file, and false for a
// field that has none (unexported, or tagged "-").
func yamlName(f reflect.StructField) (string, bool) {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || !f.IsExported() {
		return "", false
	}
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name, true
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

// yamlMessage turns a yaml decoding error into one line, and the line of
// the input it concerns (0: unknown).
func yamlMessage(err error) (line int, msg string) {
	var les *yaml.LoadErrors
	if errors.As(err, &les) && len(les.Errors) > 0 {
		msgs := make([]string, len(les.Errors))
		for i, e := range les.Errors {
			msgs[i] = e.Message
		}
		return les.Errors[0].Mark.Line, strings.Join(msgs, "; ")
	}
	return 0, strings.TrimPrefix(err.Error(), "yaml: ")
}
