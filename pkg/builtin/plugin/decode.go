package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/agnivade/levenshtein"
)

// Decode fills dst (a pointer to a struct with json tags) from a plugin's
// config: block. Every key of cfg is accounted for: a key not in keys is
// reported as unknown, a documented key the sidecar does not act on as
// unsupported (both warnings: cpex grows, and a config must keep loading);
// a value of the wrong type is a problem.
func Decode(cfg map[string]any, dst any, keys []Key) []Issue {
	var issues []Issue
	names := make([]string, 0, len(cfg))
	for k := range cfg {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		key, ok := findKey(keys, k)
		switch {
		case !ok:
			issues = append(issues, Warning(k, "unknown key: ignored"+suggest(k, keys)))
		case !key.Supported:
			issues = append(issues, Warning(k, "not supported by the built-in plugin: ignored ("+key.Note+")"))
		}
	}
	if len(cfg) == 0 {
		return issues
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return append(issues, Problem("", fmt.Sprintf("cannot read the config: %v", err)))
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return append(issues, Problem(te.Field, fmt.Sprintf("must be %s, got %s", typeName(te.Type.Kind().String()), te.Value)))
		}
		return append(issues, Problem("", fmt.Sprintf("cannot read the config: %v", err)))
	}
	return issues
}

func typeName(kind string) string {
	switch kind {
	case "slice":
		return "a list"
	case "map", "struct":
		return "a mapping"
	case "ptr":
		return "a value"
	}
	return "a " + kind
}

func findKey(keys []Key, name string) (Key, bool) {
	for _, k := range keys {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}

// suggest names the documented key closest to name, if it is a likely
// typo of it (case, separators, or two edits).
func suggest(name string, keys []Key) string {
	norm := func(s string) string { return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s)) }
	best, bestD := "", 3
	for _, k := range keys {
		if d := levenshtein.ComputeDistance(norm(k.Name), norm(name)); d < bestD {
			best, bestD = k.Name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// Err returns an error joining the problems among issues (not the
// warnings), or nil.
func Err(issues []Issue) error {
	var errs []error
	for _, is := range issues {
		if !is.Warning {
			if is.Field != "" {
				errs = append(errs, fmt.Errorf("config.%s: %s", is.Field, is.Message))
			} else {
				errs = append(errs, errors.New(is.Message))
			}
		}
	}
	return errors.Join(errs...)
}
