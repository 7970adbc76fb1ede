package mcpheaders

import (
	"sort"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Rewrite is what a pre hook changed in a request: the target name and the
// arguments, before and after (raw JSON objects; nil when absent).
type Rewrite struct {
	Method            string
	OrigName, NewName string
	OrigArgs, NewArgs []byte
}

// Plan is the header mutations that make the standard headers mirror a
// rewritten request. Names are lower case.
type Plan struct {
	Set    []Header // set (replacing every value of the header)
	Remove []string // remove
	// Uncertain lists the removed headers whose mirror could not be rebuilt
	// with certainty (no argument or several arguments matched, the new
	// value is not a primitive, an undecodable value). A server that checks
	// will refuse the request without them; a caller may prefer to refuse
	// it itself. A header is never left holding a value a hook changed.
	Uncertain []string
}

// Mirror returns the mutations of request headers h after r. Mcp-Name is set
// to the new name when it is present or required and differs. Each
// Mcp-Param header is rebuilt from the new argument it mirrors: set to its
// encoding, removed when the argument is gone or null, removed and listed as
// uncertain when the mirror is not known for sure. Which argument a header
// mirrors is found by matching its value against the original arguments.
func Mirror(h []Header, r Rewrite) Plan {
	var p Plan
	version, _ := Value(h, HeaderProtocolVersion)
	required := StandardHeaders(version)
	if named[r.Method] {
		vals := values(h, HeaderName)
		want := EncodeValue(r.NewName)
		if (len(vals) > 0 || required) && !allEqual(vals, want) {
			p.Set = append(p.Set, Header{Name: strings.ToLower(HeaderName), Value: want})
		}
	}
	if r.Method != "tools/call" {
		return p
	}
	orig, errO := leaves(r.OrigArgs)
	next, errN := leaves(r.NewArgs)
	params := paramHeaders(h)
	for _, suffix := range sortedKeys(params) {
		name := strings.ToLower(ParamPrefix) + suffix
		if errO != nil || errN != nil {
			p.uncertain(name)
			continue
		}
		p.byValue(name, params[suffix], orig, next)
	}
	return p
}

func (p *Plan) uncertain(name string) {
	p.Remove = append(p.Remove, name)
	p.Uncertain = append(p.Uncertain, name)
}

// rebuild sets header name from the new argument value raw (known to be the
// one it mirrors), unless its values already say so.
func (p *Plan) rebuild(name string, sent []string, raw jsontext.Value) {
	text, k := primitive(raw)
	switch {
	case k == kAbsent:
		p.Remove = append(p.Remove, name)
	case k == kOther:
		p.uncertain(name)
	case !allEqual(sent, EncodeValue(text)):
		p.Set = append(p.Set, Header{Name: name, Value: EncodeValue(text)})
	}
}

// byValue finds the original arguments header name mirrored by comparing
// values, and rebuilds it when they all agree on the new value.
func (p *Plan) byValue(name string, sent []string, orig, next map[string]jsontext.Value) {
	if len(sent) != 1 {
		p.uncertain(name)
		return
	}
	decoded, err := Decode(sent[0])
	if err != nil {
		p.uncertain(name)
		return
	}
	var candidates []string
	for path, raw := range orig {
		if text, k := primitive(raw); k == kPrimitive && sameValue(decoded, text, raw) {
			candidates = append(candidates, path)
		}
	}
	if len(candidates) == 0 {
		p.uncertain(name)
		return
	}
	// Every candidate must end in the same state; else the mirror is a guess.
	var want jsontext.Value
	unchanged := true
	for i, path := range candidates {
		n := next[path]
		if i == 0 {
			want = n
		} else if !sameJSON(n, want) {
			p.uncertain(name)
			return
		}
		unchanged = unchanged && sameJSON(n, orig[path])
	}
	if unchanged {
		return
	}
	p.rebuild(name, sent, want)
}

// paramHeaders groups the Mcp-Param headers of h by lower-case suffix.
func paramHeaders(h []Header) map[string][]string {
	out := map[string][]string{}
	for _, x := range h {
		if len(x.Name) > len(ParamPrefix) && strings.EqualFold(x.Name[:len(ParamPrefix)], ParamPrefix) {
			suffix := strings.ToLower(x.Name[len(ParamPrefix):])
			out[suffix] = append(out[suffix], x.Value)
		}
	}
	return out
}

// maxDepth bounds the nesting leaves walks; deeper values are not mirrored
// by any schema this package will rebuild (they stay unmatched, hence
// uncertain).
const maxDepth = 32

// leaves returns every non-object value of the JSON object args, keyed by
// pathKey of its member path. Absent args (nil) have no leaves.
func leaves(args []byte) (map[string]jsontext.Value, error) {
	out := map[string]jsontext.Value{}
	if len(args) == 0 {
		return out, nil
	}
	return out, walk(jsontext.Value(args), nil, out, 0)
}

func walk(v jsontext.Value, path []string, out map[string]jsontext.Value, depth int) error {
	if v.Kind() != '{' || depth > maxDepth {
		out[pathKey(path)] = v
		return nil
	}
	var members map[string]jsontext.Value
	if err := json.Unmarshal(v, &members); err != nil {
		return err
	}
	if len(path) > 0 {
		out[pathKey(path)] = v // the object itself: a header bound to it is not primitive
	}
	for name, m := range members {
		if err := walk(m, append(path[:len(path):len(path)], name), out, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// pathKey encodes a member path unambiguously.
func pathKey(path []string) string {
	var b strings.Builder
	for _, s := range path {
		b.WriteString(strconv.Quote(s))
		b.WriteByte('.')
	}
	return b.String()
}

func sameJSON(a, b jsontext.Value) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	ca, cb := a.Clone(), b.Clone()
	if ca.Canonicalize() != nil || cb.Canonicalize() != nil {
		return string(a) == string(b)
	}
	return string(ca) == string(cb)
}

func allEqual(vals []string, want string) bool {
	if len(vals) == 0 {
		return false
	}
	for _, v := range vals {
		if v != want {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
