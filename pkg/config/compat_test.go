package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// acceptedKeys returns the dotted path of every key the loader accepts
// under t (a key of a list of mappings names the list: plugins.mcp.url),
// walking into nested mappings. The sidecar's own extproc section is one
// key: its sub-keys are not cpex's and are documented in the README.
func acceptedKeys(prefix string, t reflect.Type) []string {
	var out []string
	for _, k := range knownKeys(t) {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		out = append(out, path)
		i, ok := yamlFields(t)[k]
		if !ok || path == "extproc" {
			continue // a cpex-only key has no fields
		}
		ft := t.Field(i).Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[Seconds]() {
			out = append(out, acceptedKeys(path, ft)...)
		}
	}
	return out
}

// compatRow matches the first cell of a table row of
// docs/cpex-compatibility.md: a key path or a hook in backquotes.
var compatRow = regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")

// TestCompatibilityDocCoversKeys fails when a key the loader accepts has
// no row in docs/cpex-compatibility.md, or when a hook cpex knows has
// none, so the table cannot fall behind the loader.
func TestCompatibilityDocCoversKeys(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cpex-compatibility.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, m := range compatRow.FindAllSubmatch(doc, -1) {
		rows = append(rows, string(m[1]))
	}
	keys := acceptedKeys("", reflect.TypeFor[Config]())
	if len(keys) < 40 {
		t.Fatalf("walked only %d keys: %v", len(keys), keys)
	}
	for _, k := range keys {
		if !slices.Contains(rows, k) {
			t.Errorf("key %s is accepted by the loader but has no row in docs/cpex-compatibility.md", k)
		}
	}
	for _, h := range cpex.KnownHooks() {
		if !slices.Contains(rows, string(h)) {
			t.Errorf("hook %s has no row in docs/cpex-compatibility.md", h)
		}
	}
}
