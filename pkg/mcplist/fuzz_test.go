package mcplist

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// FuzzFilter checks the property of Filter against an independent reading
// with encoding/json: no hidden item ever comes out, every other item comes
// out byte-identical and in order, and every member of the result other than
// the items comes out byte-identical and in order. An error is allowed only
// for what the reading finds invalid or ambiguous.
//
// kind picks the list method; mask is the hide predicate (a name is hidden
// when bit fnv(name)%64 of mask is set); with generate, data seeds a random
// but well-formed list result (which must then be accepted), else data is
// the result. Seeds: testdata/fuzz/FuzzFilter.
func FuzzFilter(f *testing.F) {
	f.Add(byte(0), []byte(`{"tools":[{"name":"a"},{"name":"b"}],"nextCursor":"c"}`), uint64(1)<<(fnv64("a")%64), false)
	f.Add(byte(2), []byte(`{"resources":[{"uri":"file:///x"}]}`), ^uint64(0), false)
	f.Add(byte(1), []byte("seed"), uint64(0x5555555555555555), true)
	f.Add(byte(3), []byte("another seed"), uint64(0xf0f0f0f0f0f0f0f0), true)
	f.Fuzz(func(t *testing.T, kind byte, data []byte, mask uint64, generate bool) {
		l := lists[int(kind)%len(lists)]
		hide := func(name string) bool { return mask>>(fnv64(name)%64)&1 == 1 }
		in := data
		if generate {
			in = generateResult(&l, data)
		}
		orig := bytes.Clone(in)
		out, dropped, err := l.Filter(in, hide)
		if !bytes.Equal(in, orig) {
			t.Fatal("Filter modified its input")
		}
		want, why := readList(&l, in)
		if err != nil {
			if out != nil || dropped != 0 {
				t.Fatalf("Filter returned %q, %d with error %v", out, dropped, err)
			}
			if why == nil && !(bytes.Contains(in, []byte(`\u`)) && strings.Contains(err.Error(), "surrogate")) {
				t.Fatalf("Filter(%q): %v; but encoding/json reads it fine", in, err)
			}
			if generate {
				t.Fatalf("Filter rejected a generated result %q: %v", in, err)
			}
			if jsontext.Value(in).IsValid(jsontext.AllowDuplicateNames(true)) {
				// Valid JSON that is no list result: EditValid refuses it too.
				if got, _, err := l.EditValid(in, 0, len(in), Edit{Hide: hide, Private: true}); err == nil {
					t.Fatalf("EditValid(%q) = %q; Filter said %v", in, got, err)
				}
			}
			checkIndexed(t, &l, in, hide)
			return
		}
		if why != nil {
			t.Fatalf("Filter accepted %q, but it is %v", in, why)
		}
		got, why := readList(&l, out)
		if why != nil {
			t.Fatalf("output %q is %v", out, why)
		}
		checkFiltered(t, want, got, hide, dropped)
		if dropped == 0 && len(in) > 0 && (len(out) != len(in) || &out[0] != &in[0]) {
			t.Fatal("nothing dropped but the result was copied")
		}
		checkEditValid(t, &l, in, out, dropped, hide)
		checkIndexed(t, &l, in, hide)
	})
}

// checkIndexed checks that EditValid gives the same with the index
// mcpmsg.ParseList makes of a message with the result in, when it makes
// one, as without.
func checkIndexed(t *testing.T, l *List, in []byte, hide func(string) bool) {
	t.Helper()
	doc := []byte(`{"jsonrpc":"2.0","id":1,"result":` + string(in) + ` , "x":[]}`)
	b, err := mcpmsg.ParseList(doc, mcpmsg.ListKeys{Items: l.ItemsKey, Name: l.NameKey})
	if err != nil {
		return
	}
	m := &b.Messages[0]
	ix, ok := m.ListIndex()
	if !ok {
		return
	}
	start, end, _ := m.ResultSpan()
	for _, private := range []bool{false, true} {
		var asked, askedIx []string
		want, ed, err := l.EditValid(m.Raw, start, end, Edit{Hide: func(n string) bool { asked = append(asked, n); return hide(n) }, Private: private})
		got, edIx, errIx := l.EditValid(m.Raw, start, end, Edit{Hide: func(n string) bool { askedIx = append(askedIx, n); return hide(n) }, Private: private, Index: ix})
		if (err == nil) != (errIx == nil) || !bytes.Equal(got, want) || ed != edIx || !slices.Equal(asked, askedIx) {
			t.Fatalf("EditValid(private %v) of %q:\nwalked  %q, %+v, %v, asked %q\nindexed %q, %+v, %v, asked %q",
				private, in, want, ed, err, asked, got, edIx, errIx, askedIx)
		}
	}
}

// checkEditValid checks EditValid against Filter and PrivateCacheScope on
// in, a result Filter accepted (out, dropped): inside a document, it must
// give what they give, the document around the result untouched.
func checkEditValid(t *testing.T, l *List, in, out []byte, dropped int, hide func(string) bool) {
	t.Helper()
	const pre, post = `{"jsonrpc":"2.0","id":1,"result":`, `,"x":[]}`
	doc := []byte(pre + string(in) + post)
	for _, private := range []bool{false, true} {
		want, scoped, err := PrivateCacheScope(out)
		if err != nil {
			t.Fatalf("PrivateCacheScope(%q): %v", out, err)
		}
		if !private {
			want, scoped = out, false
		}
		got, ed, err := l.EditValid(doc, len(pre), len(doc)-len(post), Edit{Hide: hide, Private: private})
		if err != nil {
			t.Fatalf("EditValid(private %v) of %q: %v", private, in, err)
		}
		if string(got) != pre+string(want)+post || ed.Dropped != dropped || ed.Scoped != scoped {
			t.Fatalf("EditValid(private %v) of %q = %q, %+v; want %q, %d dropped, scoped %v", private, in, got, ed, pre+string(want)+post, dropped, scoped)
		}
		if ed == (Edited{}) && &got[0] != &doc[0] {
			t.Fatalf("EditValid(private %v): nothing changed but the document was copied", private)
		}
	}
}

// checkFiltered checks that got is want without the hidden items.
func checkFiltered(t *testing.T, want, got *readResult, hide func(string) bool, dropped int) {
	t.Helper()
	if len(got.members) != len(want.members) {
		t.Fatalf("%d members out, %d in", len(got.members), len(want.members))
	}
	for i, m := range want.members {
		g := got.members[i]
		if g.name != m.name || i != want.items && !bytes.Equal(g.raw, m.raw) {
			t.Fatalf("member %d: %q: %s out, %q: %s in", i, g.name, g.raw, m.name, m.raw)
		}
	}
	if got.items != want.items {
		t.Fatalf("items at member %d out, %d in", got.items, want.items)
	}
	var kept []readItem
	for _, it := range want.list {
		if !hide(it.name) {
			kept = append(kept, it)
		}
	}
	if len(got.list) != len(kept) || dropped != len(want.list)-len(kept) {
		t.Fatalf("%d items out, %d dropped, of %d; want %d out", len(got.list), dropped, len(want.list), len(kept))
	}
	for i, it := range got.list {
		if hide(it.name) {
			t.Fatalf("hidden item %q came out", it.name)
		}
		if !bytes.Equal(it.raw, kept[i].raw) {
			t.Fatalf("item %d out is %s, want %s", i, it.raw, kept[i].raw)
		}
	}
}

// readResult is a list result as encoding/json reads it.
type readResult struct {
	members []readMember // the result's members, in order
	items   int          // the index of the items member, or -1
	list    []readItem
}

type readMember struct {
	name string
	raw  json.RawMessage
}

type readItem struct {
	name string // "" unless a string
	raw  json.RawMessage
}

// readList reads b as Filter should, independently of it: with
// encoding/json, which keeps raw member values and array elements. It
// returns why b is not a list result Filter must accept.
func readList(l *List, b []byte) (*readResult, error) {
	if !json.Valid(b) {
		return nil, errors.New("invalid JSON")
	}
	if !utf8.Valid(b) {
		return nil, errors.New("invalid UTF-8")
	}
	members, err := readMembers(b)
	if err != nil {
		return nil, err
	}
	r := &readResult{members: members, items: -1}
	for i, m := range members {
		if !strings.EqualFold(m.name, l.ItemsKey) {
			continue
		}
		if r.items >= 0 || m.name != l.ItemsKey {
			return nil, fmt.Errorf("ambiguous: %q", m.name)
		}
		r.items = i
		var raws []json.RawMessage
		if m.raw[0] != '[' {
			return nil, errors.New("items not an array")
		}
		if err := json.Unmarshal(m.raw, &raws); err != nil {
			return nil, err
		}
		caseless := reflect.StructOf([]reflect.StructField{{
			Name: "Name", Type: reflect.TypeFor[json.RawMessage](), Tag: reflect.StructTag(`json:"` + l.NameKey + `"`),
		}})
		for _, raw := range raws {
			it, err := readItemOf(l, caseless, raw)
			if err != nil {
				return nil, err
			}
			r.list = append(r.list, it)
		}
	}
	return r, nil
}

// readItemOf reads one item, and checks that a client that matches names
// case-insensitively (encoding/json into caseless, a struct with one field
// for the name) reads the same name.
func readItemOf(l *List, caseless reflect.Type, raw json.RawMessage) (readItem, error) {
	members, err := readMembers(raw)
	if err != nil {
		return readItem{}, err
	}
	it := readItem{raw: raw}
	seen := false
	for _, m := range members {
		if !strings.EqualFold(m.name, l.NameKey) {
			continue
		}
		if seen || m.name != l.NameKey {
			return readItem{}, fmt.Errorf("ambiguous: %q", m.name)
		}
		seen = true
		if m.raw[0] == '"' {
			if err := json.Unmarshal(m.raw, &it.name); err != nil {
				return readItem{}, err
			}
		}
	}
	v := reflect.New(caseless)
	if err := json.Unmarshal(raw, v.Interface()); err != nil {
		return readItem{}, err
	}
	var name string
	if r := v.Elem().Field(0).Bytes(); len(r) > 0 && r[0] == '"' {
		if err := json.Unmarshal(r, &name); err != nil {
			return readItem{}, err
		}
	}
	if name != it.name {
		return readItem{}, fmt.Errorf("a case-insensitive client reads name %q, not %q", name, it.name)
	}
	return it, nil
}

// readMembers returns the members of the JSON object b in order, with
// duplicates; an error if b is not an object.
func readMembers(b []byte) ([]readMember, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	var ms []readMember
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, err
		}
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return nil, err
		}
		ms = append(ms, readMember{name: tok.(string), raw: raw})
	}
	if _, err := d.Token(); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the object")
	}
	return ms, nil
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// generateResult returns a random, well-formed and unambiguous result of l,
// seeded by data: 0 to 300 items with nested values, other members at both
// levels (duplicates and case variants of the keys only deep inside),
// pagination cursors, escapes and random whitespace.
func generateResult(l *List, data []byte) []byte {
	h := fnv.New128a()
	h.Write(data)
	sum := h.Sum(nil)
	g := &gen{
		r: rand.New(rand.NewPCG(
			uint64FromBytes(sum[:8]), uint64FromBytes(sum[8:]))),
		l: l,
	}
	g.style = g.r.IntN(4)
	g.result()
	return g.b
}

func uint64FromBytes(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

type gen struct {
	r     *rand.Rand
	l     *List
	b     []byte
	style int // 0 compact, 1 spaces, 2 pretty-ish, 3 random whitespace
}

// ws writes whitespace in the document's style.
func (g *gen) ws() {
	switch g.style {
	case 1:
		g.b = append(g.b, ' ')
	case 2:
		g.b = append(g.b, '\n')
		g.b = append(g.b, strings.Repeat("  ", g.r.IntN(4))...)
	case 3:
		for range g.r.IntN(3) {
			g.b = append(g.b, " \t\r\n"[g.r.IntN(4)])
		}
	}
}

// names are the item names; few, so that the hide mask hits some of them
// more than once.
var names = []string{"a", "b", "echo", "get-weather", "file:///etc/passwd", "db://{table}/{id}", "", "é", "😀", "a\"b", "tab\tx", "na\\me", "x/y"}

// members writes an object whose members come from key (special, may be
// "") and n others from pool, in random order.
func (g *gen) object(special string, value func(), pool []string, depth int) {
	n := g.r.IntN(5)
	at := -1
	if special != "" {
		at = g.r.IntN(n + 1)
	}
	g.b = append(g.b, '{')
	for i := 0; i <= n; i++ {
		if i == n && at != n {
			break
		}
		if i > 0 {
			g.b = append(g.b, ',')
		}
		g.ws()
		if i == at {
			g.str(special)
			g.ws()
			g.b = append(g.b, ':')
			g.ws()
			value()
		} else {
			g.str(pool[g.r.IntN(len(pool))])
			g.ws()
			g.b = append(g.b, ':')
			g.ws()
			g.value(depth + 1)
		}
		g.ws()
	}
	g.b = append(g.b, '}')
}

func (g *gen) result() {
	g.ws()
	pool := []string{"nextCursor", "_meta", "x", "tools", "prompts", "resources", "resourceTemplates", "TOOLS"}
	pool = slicesDeleteFold(pool, g.l.ItemsKey)
	special := g.l.ItemsKey
	if g.r.IntN(10) == 0 {
		special = "" // no items
	}
	g.object(special, g.items, pool, 0)
	g.ws()
}

func (g *gen) items() {
	// Mostly short lists, to keep an execution cheap; sometimes a long one.
	n := g.r.IntN(21)
	if g.r.IntN(8) == 0 {
		n = g.r.IntN(301)
	}
	g.b = append(g.b, '[')
	for i := range n {
		if i > 0 {
			g.b = append(g.b, ',')
		}
		g.ws()
		g.item()
		g.ws()
	}
	g.b = append(g.b, ']')
}

func (g *gen) item() {
	pool := []string{"title", "description", "inputSchema", "_meta", "annotations", "name2", "uri", "name", "uriTemplate", "mimeType"}
	pool = slicesDeleteFold(pool, g.l.NameKey)
	special := g.l.NameKey
	if g.r.IntN(8) == 0 {
		special = ""
	}
	g.object(special, func() {
		if g.r.IntN(8) == 0 {
			g.value(3) // not a string, most often
			return
		}
		g.str(names[g.r.IntN(len(names))])
	}, pool, 1)
}

// value writes a random value; deep inside, member names may repeat and
// may be case variants of the keys.
func (g *gen) value(depth int) {
	k := g.r.IntN(8)
	if depth > 4 {
		k %= 5
	}
	switch k {
	case 0:
		g.b = append(g.b, "null"...)
	case 1:
		g.b = append(g.b, []string{"true", "false", "0", "-1.5e3", "12345678901234567890"}[g.r.IntN(5)]...)
	case 2, 3, 4:
		g.str(names[g.r.IntN(len(names))])
	case 5, 6:
		pool := []string{"type", "type", "Name", "name", "NAME", g.l.ItemsKey, strings.ToUpper(g.l.ItemsKey), "properties"}
		g.object("", nil, pool, depth)
	default:
		n := g.r.IntN(4)
		g.b = append(g.b, '[')
		for i := range n {
			if i > 0 {
				g.b = append(g.b, ',')
			}
			g.ws()
			g.value(depth + 1)
		}
		g.ws()
		g.b = append(g.b, ']')
	}
}

// str writes s as a JSON string, escaping some characters that need no
// escape.
func (g *gen) str(s string) {
	g.b = append(g.b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			g.b = append(g.b, '\\', byte(r))
		case r < 0x20:
			g.b = fmt.Appendf(g.b, `\u%04x`, r)
		case g.r.IntN(30) == 0 && r < 0x10000:
			g.b = fmt.Appendf(g.b, `\u%04X`, r)
		case g.r.IntN(8) == 0 && r == '/':
			g.b = append(g.b, `\/`...)
		default:
			g.b = utf8.AppendRune(g.b, r)
		}
	}
	g.b = append(g.b, '"')
}

// slicesDeleteFold returns pool without the names equal to key ignoring case.
func slicesDeleteFold(pool []string, key string) []string {
	var out []string
	for _, p := range pool {
		if !strings.EqualFold(p, key) {
			out = append(out, p)
		}
	}
	return out
}
