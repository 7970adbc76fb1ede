package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// check runs the deny rules over obj[subject] and the strings of obj[field].
func (p *Plugin) check(obj map[string]any, subject, field string) *cpex.PluginViolation {
	if len(p.deny) == 0 {
		return nil
	}
	type candidate struct{ path, text string }
	var cands []candidate
	if s, ok := obj[subject].(string); ok {
		cands = append(cands, candidate{subject, s})
	}
	if field != "" {
		walkStrings(obj[field], field, func(path, s string) {
			cands = append(cands, candidate{path, s})
		})
	}
	for _, re := range p.deny {
		for _, c := range cands {
			if re.MatchString(c.text) {
				return &cpex.PluginViolation{
					Reason:      "Denied by policy",
					Description: fmt.Sprintf("%s matches deny pattern %q", c.path, re.String()),
					Code:        p.cfg.ViolationCode,
					Details:     map[string]any{"pattern": re.String(), "field": c.path},
				}
			}
		}
	}
	return nil
}

// structural names result fields whose strings are never redacted.
func structural(key string) bool {
	switch key {
	case "type", "mimeType", "uri", "blob", "_meta":
		return true
	}
	return false
}

// redactValue returns v with the redactions applied to its strings, and the
// number of replacements. In results (post) structural fields are skipped.
func (p *Plugin) redactValue(v any, post bool) (any, int) {
	switch x := v.(type) {
	case string:
		n := 0
		for _, r := range p.redact {
			if m := r.re.FindAllStringIndex(x, -1); len(m) > 0 {
				n += len(m)
				x = r.re.ReplaceAllString(x, r.repl)
			}
		}
		return x, n
	case map[string]any:
		total := 0
		for k, e := range x {
			if post && structural(k) {
				continue
			}
			ne, n := p.redactValue(e, post)
			if n > 0 {
				x[k] = ne
				total += n
			}
		}
		return x, total
	case []any:
		total := 0
		for i, e := range x {
			ne, n := p.redactValue(e, post)
			if n > 0 {
				x[i] = ne
				total += n
			}
		}
		return x, total
	}
	return v, 0
}

// walkStrings calls fn for every string in v, in a stable order, with a
// path such as args.cmd[0].
func walkStrings(v any, path string, fn func(path, s string)) {
	switch x := v.(type) {
	case string:
		fn(path, x)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walkStrings(x[k], path+"."+k, fn)
		}
	case []any:
		for i, e := range x {
			walkStrings(e, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	}
}

// decodeObject decodes a JSON object, keeping numbers exact.
func decodeObject(raw json.RawMessage) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if obj == nil {
		obj = map[string]any{}
	}
	return obj, nil
}
