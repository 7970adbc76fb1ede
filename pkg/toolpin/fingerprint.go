// Package toolpin pins the definitions MCP servers advertise (tools,
// prompts, resource templates), so that a definition that changes after it
// was approved (a "rug pull": the agent follows a new description or
// schema) is noticed, and hidden or refused.
//
// A definition's fingerprint covers what an agent reads or relies on, field
// by field, each field's value in canonical JSON (RFC 8785, by
// go-json-experiment/jsontext): key order and whitespace do not change it,
// anything else does. Fingerprints are pinned per MCP server (a scope) in a
// [Store]: the first definition seen (mode record) or an approved snapshot
// file (mode approved, [Snapshot]).
package toolpin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Kind is a kind of definition a list result carries.
type Kind string

// The kinds pinned, each with the list it comes in.
const (
	Tool             Kind = "tool"             // tools/list
	Prompt           Kind = "prompt"           // prompts/list
	ResourceTemplate Kind = "resourceTemplate" // resources/templates/list
)

// kinds is the table of what each kind's fingerprint covers: its name
// member first, then every member an agent reads or relies on.
var kinds = map[Kind][]string{
	Tool:             {"name", "title", "description", "inputSchema", "outputSchema", "annotations"},
	Prompt:           {"name", "title", "description", "arguments"},
	ResourceTemplate: {"uriTemplate", "name", "title", "description", "mimeType", "annotations"},
}

// KindOfList returns the kind of the items of a list method, and false for
// a list whose items are not pinned (resources/list: resources are data,
// not instructions).
func KindOfList(method string) (Kind, bool) {
	switch method {
	case "tools/list":
		return Tool, true
	case "prompts/list":
		return Prompt, true
	case "resources/templates/list":
		return ResourceTemplate, true
	}
	return "", false
}

// Fingerprint is a definition's fingerprint: for each member it covers
// that the definition has, the SHA-256 of the member's value in canonical
// JSON (hex). Two definitions have equal fingerprints exactly when those
// members are equal as JSON values.
type Fingerprint map[string]string

// Equal reports whether f and g cover the same members with the same
// values.
func (f Fingerprint) Equal(g Fingerprint) bool {
	if len(f) != len(g) {
		return false
	}
	for k, v := range f {
		if w, ok := g[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Diff returns the members whose values differ between f and g (present in
// one only, or different), sorted.
func (f Fingerprint) Diff(g Fingerprint) []string {
	var out []string
	for k, v := range f {
		if g[k] != v {
			out = append(out, k)
		}
	}
	for k := range g {
		if _, ok := f[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Sum is one hash of the whole fingerprint (hex SHA-256 over its members
// in order), for logs and snapshot files.
func (f Fingerprint) Sum() string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\n", k, f[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ErrDefinition is wrapped by the errors of Of: the item is not a JSON
// object, has no string name, or names a member twice.
var ErrDefinition = errors.New("toolpin: unreadable definition")

// Of returns the name and fingerprint of item, one element of a list
// result of kind k (a JSON object).
func Of(k Kind, item []byte) (name string, fp Fingerprint, err error) {
	fields, ok := kinds[k]
	if !ok {
		return "", nil, fmt.Errorf("%w: unknown kind %q", ErrDefinition, k)
	}
	var members map[string]jsontext.Value
	if err := json.Unmarshal(item, &members); err != nil { // duplicate names are an error
		return "", nil, fmt.Errorf("%w: %v", ErrDefinition, err)
	}
	if err := json.Unmarshal(members[fields[0]], &name); err != nil || name == "" {
		return "", nil, fmt.Errorf("%w: no string %q", ErrDefinition, fields[0])
	}
	fp = make(Fingerprint, len(fields))
	for _, f := range fields {
		v, ok := members[f]
		if !ok {
			continue
		}
		v = v.Clone()
		if err := v.Canonicalize(); err != nil {
			return "", nil, fmt.Errorf("%w: %s: %v", ErrDefinition, f, err)
		}
		sum := sha256.Sum256(v)
		fp[f] = hex.EncodeToString(sum[:])
	}
	return name, fp, nil
}

// NotApproved is the one member of the change of a definition that an
// approved snapshot does not hold at all.
const NotApproved = "(not approved)"

// Change is what differs between a pinned definition and the one a list
// now shows.
type Change struct {
	Kind    Kind
	Name    string
	Members []string // the members that differ, or [NotApproved]
}

// String says what changed, for logs and the JSON-RPC error a client gets.
func (c Change) String() string {
	if slices.Equal(c.Members, []string{NotApproved}) {
		return fmt.Sprintf("%s %q is not among the approved definitions", c.Kind, c.Name)
	}
	return fmt.Sprintf("%s %q changed since it was pinned: %s", c.Kind, c.Name, strings.Join(c.Members, ", "))
}
