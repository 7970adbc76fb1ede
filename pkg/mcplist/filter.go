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
// The work is two light passes over result: jsontext validates it
// (syntax and UTF-8, without allocating), then the items are found by
// their structure alone, as [List.EditValid] does. Allocations: a scratch
// buffer if member names or names have escapes, one output buffer of about
// len(result) bytes when something is dropped, and each name handed to
// hide (a new string, so hide may keep it). Only a result that is not
// valid JSON is read a third time, to say why.
func (l *List) Filter(result []byte, hide func(name string) bool) (out []byte, dropped int, err error) {
	return l.filter(walk{l: l, doc: result, end: len(result), hide: hide})
}

// FilterItems is Filter with hide also given each item, a JSON object as
// it is in result (valid until result changes).
func (l *List) FilterItems(result []byte, hide func(name string, item []byte) bool) (out []byte, dropped int, err error) {
	return l.filter(walk{l: l, doc: result, end: len(result), hideItem: hide})
}

func (l *List) filter(w walk) (out []byte, dropped int, err error) {
	result := w.doc
	if !jsontext.Value(result).IsValid(jsontext.AllowDuplicateNames(true)) {
		return nil, 0, fmt.Errorf("mcplist: %s result: %w", l.Method, l.explain(result))
	}
	if err := w.result(); err != nil {
		return nil, 0, fmt.Errorf("mcplist: %s result: %w", l.Method, err)
	}
	if w.out == nil {
		return result, 0, nil
	}
	return append(w.out, result[w.tail:]...), w.ed.Dropped, nil
}

// explain returns why result, which is not valid JSON, cannot be
// filtered: the first error a token-by-token reading meets, a semantic
// one (an item that is not an object, ...) when it comes before the
// syntax error.
func (l *List) explain(result []byte) error {
	f := filter{l: l}
	f.dec = jsontext.NewDecoder(bytes.NewBuffer(result), jsontext.AllowDuplicateNames(true))
	return orSyntax(f.result())
}

// filter is the state of one explain call: a token-by-token reading
// that stops at the first error.
type filter struct {
	l     *List
	dec   *jsontext.Decoder
	unesc []byte // scratch for member names with escapes
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

// items walks the items array.
func (f *filter) items() error {
	tok, err := f.dec.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != '[' {
		return fmt.Errorf("member %q is %s, not an array", f.l.ItemsKey, kindName(tok.Kind()))
	}
	for i := 0; ; i++ {
		switch k := f.dec.PeekKind(); k {
		case ']':
			_, err := f.dec.ReadToken()
			return err
		case '{':
		case 0:
			_, err := f.dec.ReadToken() // the error PeekKind saw
			return orSyntax(err)
		default:
			return fmt.Errorf("%s[%d] is %s, not an object", f.l.ItemsKey, i, kindName(k))
		}
		if err := f.item(i); err != nil {
			return err
		}
	}
}

// item reads item i, an object.
func (f *filter) item(i int) error {
	if _, err := f.dec.ReadToken(); err != nil { // '{', peeked by the caller
		return err
	}
	seen := false
	for {
		key, ok, err := f.memberName()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if !bytes.EqualFold(key, []byte(f.l.NameKey)) {
			if err := f.skip(); err != nil {
				return err
			}
			continue
		}
		if err := checkKey(key, f.l.NameKey, seen); err != nil {
			return fmt.Errorf("%s[%d]: %w", f.l.ItemsKey, i, err)
		}
		seen = true
		v, err := f.dec.ReadValue()
		if err != nil {
			return err
		}
		if v.Kind() == '"' {
			if _, err := f.unquote(v); err != nil {
				return err
			}
		}
	}
	_, err := f.dec.ReadToken() // '}'
	return err
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
