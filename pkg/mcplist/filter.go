package mcplist

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json/jsontext"
)

// Filter returns result (the JSON value of the JSON-RPC "result" member)
// without the items for which hide(name) is true, and how many were dropped.
// When nothing is dropped it returns result itself (same slice, no copy);
// otherwise a new slice, and result is not modified. hide is called once per
// item, in order; on an error it may have been called for some items.
//
// name is the item's NameKey member when it is a JSON string (unescaped),
// else "" (no such member, or a number, null, ...): hide decides on "".
//
// Errors (the caller must then not forward the result): invalid JSON
// (including invalid UTF-8 and lone surrogate escapes, which RFC 8259
// excludes and clients repair in different ways), data after the value, a
// result that is not an object, an items member that is not an array
// (also null), an item that is not an object, and a result or an item with
// more than one member that matches ItemsKey or NameKey, or with one that
// matches only when case is ignored.
//
// Why case matters: Go's encoding/json v1 and .NET's web defaults match
// member names case-insensitively, JavaScript does not. For
// {"name":"a","Name":"b"} a JavaScript client reads "a" and a Go client
// reads "b" (the last match wins); for {"Tools":[...]} a Go client sees
// tools that a JavaScript client, and a case-sensitive filter, would not.
// Names are compared under Unicode simple case folding (bytes.EqualFold,
// which is what encoding/json v1 does, including K U+212A KELVIN SIGN
// for 'k'). The dash- and underscore-blind matching that
// encoding/json/v2 offers as an option is not treated as a match.
//
// Duplicate member names elsewhere (e.g. deep in a tool's inputSchema, or
// two "nextCursor" members) are not this package's concern and are
// accepted, as encoding/json accepts them.
//
// The work is one pass over result, linear in its length. Allocations: the
// decoder, a scratch buffer if member names or names have escapes, one
// output buffer of at most len(result) bytes when something is dropped, and
// each name handed to hide (a new string, so hide may keep it).
func (l *List) Filter(result []byte, hide func(name string) bool) (out []byte, dropped int, err error) {
	return l.filter(filter{l: l, src: result, hide: hide})
}

// FilterItems is Filter with hide also given each item, a JSON object as
// it is in result (valid until result changes).
func (l *List) FilterItems(result []byte, hide func(name string, item []byte) bool) (out []byte, dropped int, err error) {
	return l.filter(filter{l: l, src: result, hideItem: hide})
}

func (l *List) filter(f filter) (out []byte, dropped int, err error) {
	result := f.src
	f.dec = jsontext.NewDecoder(bytes.NewBuffer(result), jsontext.AllowDuplicateNames(true))
	if err := f.result(); err != nil {
		return nil, 0, fmt.Errorf("mcplist: %s result: %w", l.Method, err)
	}
	if f.out == nil {
		return result, 0, nil
	}
	return f.out, f.dropped, nil
}

// filter is the state of one Filter call.
type filter struct {
	l    *List
	src  []byte
	hide func(string) bool // or hideItem
	dec  *jsontext.Decoder

	hideItem func(name string, item []byte) bool

	unesc []byte // scratch for member names with escapes

	// The output, nil until the first item is dropped. Up to tail, src
	// has been either copied to out or dropped; the rest is copied last.
	out     []byte
	tail    int
	dropped int
}

// errNoValue explains an io.EOF from the decoder at the top level.
var errNoValue = errors.New("no JSON value")

// result walks the top-level object.
func (f *filter) result() error {
	tok, err := f.dec.ReadToken()
	switch {
	case err == io.EOF:
		return errNoValue
	case err != nil:
		return err
	case tok.Kind() != '{':
		return fmt.Errorf("result is %s, not an object", kindName(tok.Kind()))
	}
	seen := false
	for {
		name, ok, err := f.memberName()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if !bytes.EqualFold(name, []byte(f.l.ItemsKey)) {
			if err := f.skip(); err != nil {
				return err
			}
			continue
		}
		if err := checkKey(name, f.l.ItemsKey, seen); err != nil {
			return err
		}
		seen = true
		if err := f.items(); err != nil {
			return err
		}
	}
	if _, err := f.dec.ReadToken(); err != nil { // the closing brace
		return err
	}
	switch _, err := f.dec.ReadToken(); err {
	case io.EOF:
	case nil:
		return errors.New("data after the result")
	default:
		return err
	}
	if f.out != nil {
		f.out = append(f.out, f.src[f.tail:]...)
	}
	return nil
}

// checkKey reports whether name, which matches key when case is ignored,
// makes the object ambiguous: it is a second match, or not an exact one.
func checkKey(name []byte, key string, seen bool) error {
	switch {
	case seen:
		return fmt.Errorf("duplicate member %s (a client may read either)", quote(name))
	case string(name) != key:
		return fmt.Errorf("member %s differs from %q only in case (a client may read it as %q)", quote(name), key, key)
	}
	return nil
}

// items walks the items array and drops the hidden items. Each kept item
// keeps the separator (comma and whitespace) that preceded it, except that
// the first kept one gets the whitespace that preceded the first item; the
// whitespace after the last item stays after the last kept one. So a
// pretty-printed array stays pretty, and the result is valid JSON.
func (f *filter) items() error {
	tok, err := f.dec.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != '[' {
		return fmt.Errorf("member %q is %s, not an array", f.l.ItemsKey, kindName(tok.Kind()))
	}
	open := int(f.dec.InputOffset()) // just after '['
	prevEnd := open                  // end of the previous item, or open
	first := -1                      // start of the first item
	wrote := false                   // an item was written to out
	for i := 0; ; i++ {
		switch k := f.dec.PeekKind(); k {
		case ']':
			if _, err := f.dec.ReadToken(); err != nil {
				return err
			}
			if f.out != nil {
				closing := int(f.dec.InputOffset()) - 1
				if wrote {
					f.out = append(f.out, f.src[prevEnd:closing]...)
				}
				f.tail = closing
			}
			return nil
		case '{':
		case 0:
			_, err := f.dec.ReadToken() // the error PeekKind saw
			return orSyntax(err)
		default:
			return fmt.Errorf("%s[%d] is %s, not an object", f.l.ItemsKey, i, kindName(k))
		}
		start, end, name, err := f.item(i)
		if err != nil {
			return err
		}
		if first < 0 {
			first = start
		}
		switch {
		case f.hides(name, start, end):
			f.dropped++
			if f.out == nil {
				f.out = append(make([]byte, 0, len(f.src)), f.src[:prevEnd]...)
				wrote = i > 0
			}
		case f.out != nil:
			if wrote {
				f.out = append(f.out, f.src[prevEnd:start]...)
			} else {
				f.out = append(f.out, f.src[open:first]...)
			}
			f.out = append(f.out, f.src[start:end]...)
			wrote = true
		}
		prevEnd = end
	}
}

// hides asks the caller's hide about the item at src[start:end].
func (f *filter) hides(name string, start, end int) bool {
	if f.hideItem != nil {
		return f.hideItem(name, f.src[start:end])
	}
	return f.hide(name)
}

// item reads item i, an object, and returns where it is and its name.
func (f *filter) item(i int) (start, end int, name string, err error) {
	if _, err := f.dec.ReadToken(); err != nil { // '{', peeked by the caller
		return 0, 0, "", err
	}
	start = int(f.dec.InputOffset()) - 1
	seen := false
	for {
		key, ok, err := f.memberName()
		if err != nil {
			return 0, 0, "", err
		}
		if !ok {
			break
		}
		if !bytes.EqualFold(key, []byte(f.l.NameKey)) {
			if err := f.skip(); err != nil {
				return 0, 0, "", err
			}
			continue
		}
		if err := checkKey(key, f.l.NameKey, seen); err != nil {
			return 0, 0, "", fmt.Errorf("%s[%d]: %w", f.l.ItemsKey, i, err)
		}
		seen = true
		v, err := f.dec.ReadValue()
		if err != nil {
			return 0, 0, "", err
		}
		if v.Kind() == '"' {
			s, err := f.unquote(v)
			if err != nil {
				return 0, 0, "", err
			}
			name = string(s)
		}
	}
	if _, err := f.dec.ReadToken(); err != nil { // '}'
		return 0, 0, "", err
	}
	return start, int(f.dec.InputOffset()), name, nil
}

// skip steps over the next value. ReadValue, not SkipValue: SkipValue
// reads an object or array token by token, ReadValue consumes it in one go
// (several times faster), and with the input in a bytes.Buffer the value
// it returns is a sub-slice of the input, not a copy.
func (f *filter) skip() error {
	_, err := f.dec.ReadValue()
	return err
}

// memberName reads the next member name of the current object, unescaped
// (valid until the next call), or returns false at the end of the object,
// leaving the closing brace to be read.
func (f *filter) memberName() ([]byte, bool, error) {
	switch f.dec.PeekKind() {
	case '}':
		return nil, false, nil
	case '"':
	default:
		_, err := f.dec.ReadToken() // a syntax error
		return nil, false, orSyntax(err)
	}
	v, err := f.dec.ReadValue()
	if err != nil {
		return nil, false, err
	}
	name, err := f.unquote(v)
	return name, err == nil, err
}

// unquote returns the content of the JSON string v: a sub-slice of v when it
// has no escapes, else the unescaped text in f.unesc.
func (f *filter) unquote(v jsontext.Value) ([]byte, error) {
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1], nil
	}
	u, err := jsontext.AppendUnquote(f.unesc[:0], v)
	if err != nil {
		return nil, err
	}
	f.unesc = u
	return u, nil
}

// orSyntax returns err, or a syntax error if a read that should have failed
// did not.
func orSyntax(err error) error {
	if err == nil {
		return errors.New("invalid JSON")
	}
	return err
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "invalid"
}

// quote quotes name for an error message, shortened.
func quote(name []byte) string {
	const max = 64
	if len(name) > max {
		return fmt.Sprintf("%q…", name[:max])
	}
	return fmt.Sprintf("%q", name)
}
