package mcplist

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// Edit says what [List.EditValid] changes in a list result.
type Edit struct {
	// Hide is asked about every item, once and in order, with its name as
	// Filter's hide is; the items it is true for are dropped. nil drops
	// none.
	Hide func(name string) bool
	// Private sets every top-level cacheScope member of the result that is
	// not "private" to "private", as [PrivateCacheScope] does.
	Private bool
	// Buf, if not nil, is where the output is built when something
	// changes: appended to Buf[:0], and grown when its capacity is short.
	// A caller that edits many lists reuses one buffer this way instead
	// of a new one per list; the output then shares Buf's memory (or
	// replaces it, when it grew).
	Buf []byte
	// Index, if not nil, is where mcpmsg.ParseList found the items of
	// the result (offsets into the doc given to EditValid, as
	// Message.ListIndex gives them for Message.Raw), with this list's
	// ItemsKey and NameKey: the result is then not read again, only the
	// items it hides and the bytes around them copied.
	Index *mcpmsg.ListIndex
}

// Edited is what [List.EditValid] changed.
type Edited struct {
	// Dropped is the number of items dropped.
	Dropped int
	// Scoped reports that a cacheScope member was set to "private".
	Scoped bool
}

// EditValid returns doc with the list result doc[start:end] edited as e
// says: the hidden items dropped and, with e.Private, the cache scope made
// private. Every other byte of doc, inside the result or around it, comes
// out as it came in, as with [List.Filter], whose errors it also returns.
// When nothing changes it returns doc itself (no copy); otherwise one new
// slice (built in e.Buf when given), and doc is not modified.
//
// doc[start:end] must be one JSON value that has been checked as strictly
// valid already (mcpmsg.Parse checks every value of a body it accepts): its
// structure is read, not validated again, so this is one light pass with no
// allocation but the output. On input that is not valid JSON it returns an
// error or a result that is not meaningful; it never panics. With
// e.Index it does not read the result at all (an index that does not fit
// the span is not followed).
//
// The names handed to e.Hide alias doc when they have no escapes: they
// are valid while doc is unchanged, so a Hide that keeps a name must not
// let doc change under it (or keep a copy, strings.Clone).
func (l *List) EditValid(doc []byte, start, end int, e Edit) (out []byte, ed Edited, err error) {
	if start < 0 || end > len(doc) || start > end {
		return nil, Edited{}, fmt.Errorf("mcplist: %s result: span [%d:%d] outside a document of %d bytes", l.Method, start, end, len(doc))
	}
	w := walk{l: l, doc: doc, i: start, end: end, hide: e.Hide, private: e.Private, alias: true, buf: e.Buf}
	if e.Index != nil && l.indexFits(e.Index, start, end) {
		err = w.indexed(e.Index)
	} else {
		err = w.result()
	}
	if err != nil {
		return nil, Edited{}, fmt.Errorf("mcplist: %s result: %w", l.Method, err)
	}
	if w.out == nil {
		return doc, w.ed, nil
	}
	return append(w.out, doc[w.tail:]...), w.ed, nil
}

// walk is the state of one pass over a list result known to be valid
// JSON: doc[i:end] is what is left to read.
type walk struct {
	l      *List
	doc    []byte
	i, end int

	hide     func(name string) bool
	hideItem func(name string, item []byte) bool // instead of hide
	private  bool
	// alias hands hide names that share doc's memory; else copies.
	alias bool

	unesc []byte // scratch for names with escapes
	buf   []byte // where the output starts, when not nil (Edit.Buf)

	// The output, nil until the first change. doc[:tail] has been
	// copied to out or dropped.
	out  []byte
	tail int
	ed   Edited
}

// errStructure is the error on input that is not the valid JSON the walk
// was promised.
var errStructure = errors.New("invalid JSON")

// result walks the top-level object.
func (w *walk) result() error {
	w.ws()
	if c := w.peek(); c != '{' {
		if c == 0 {
			return errNoValue
		}
		return fmt.Errorf("result is %s, not an object", kindName(kindOf(c)))
	}
	w.i++
	seen := false
	for first := true; ; first = false {
		name, ok, err := w.memberName(first)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		switch {
		case bytes.EqualFold(name, []byte(w.l.ItemsKey)):
			if err := checkKey(name, w.l.ItemsKey, seen); err != nil {
				return err
			}
			seen = true
			if err := w.items(); err != nil {
				return err
			}
		case w.private && bytes.EqualFold(name, []byte("cacheScope")):
			if err := w.scope(); err != nil {
				return err
			}
		default:
			if err := w.skip(); err != nil {
				return err
			}
		}
	}
	w.ws()
	if w.i != w.end {
		return errors.New("data after the result")
	}
	return nil
}

// indexFits reports whether ix is an index of l's items that lies within
// the result doc[start:end], in order: an index of another list or
// another document is not followed.
func (l *List) indexFits(ix *mcpmsg.ListIndex, start, end int) bool {
	if ix.Keys != (mcpmsg.ListKeys{Items: l.ItemsKey, Name: l.NameKey}) {
		return false
	}
	if ix.Open <= start || ix.Close < ix.Open || ix.Close >= end {
		return false
	}
	if sc := ix.Scope; sc[0] >= 0 && (sc[0] <= start || sc[1] <= sc[0] || sc[1] >= end || (sc[1] >= ix.Open && sc[0] <= ix.Close)) {
		return false
	}
	prev := ix.Open
	for _, it := range ix.Items {
		if it.Start < prev || it.End <= it.Start || it.End > ix.Close {
			return false
		}
		if it.NameStart >= 0 && (it.NameStart <= it.Start || it.NameEnd < it.NameStart || it.NameEnd >= it.End) {
			return false
		}
		prev = it.End
	}
	return true
}

// indexed is result for a result ParseList indexed: the items are asked
// about and dropped, and the cache scope set, in the order they come,
// without reading the result.
func (w *walk) indexed(ix *mcpmsg.ListIndex) error {
	scope := w.private && ix.Scope[0] >= 0
	if scope && ix.Scope[0] < ix.Open {
		w.scopeAt(ix.Scope[0], ix.Scope[1])
		scope = false
	}
	o := itemsOut{open: ix.Open, prevEnd: ix.Open, first: -1}
	for k, it := range ix.Items {
		name := ""
		if it.NameStart >= 0 {
			var err error
			if name, err = w.name(it.NameStart, it.NameEnd, it.NameEscaped); err != nil {
				return err
			}
		}
		w.keepOrDrop(&o, k, it.Start, it.End, name)
	}
	w.closeItems(&o, ix.Close)
	if scope {
		w.scopeAt(ix.Scope[0], ix.Scope[1])
	}
	return nil
}

// scope reads a cacheScope value and replaces it with "private" unless it
// is that already.
func (w *walk) scope() error {
	start := w.i
	if err := w.skip(); err != nil {
		return err
	}
	w.scopeAt(start, w.i)
	return nil
}

// scopeAt replaces the cacheScope value doc[start:end] with "private"
// unless it is that already.
func (w *walk) scopeAt(start, end int) {
	const private = `"private"`
	if string(w.doc[start:end]) == private {
		return
	}
	w.flush(start)
	w.out = append(w.out, private...)
	w.tail = end
	w.ed.Scoped = true
}

// flush starts the output if need be and copies doc[tail:to] to it.
func (w *walk) flush(to int) {
	if w.out == nil {
		w.out = slices.Grow(w.buf[:0], len(w.doc)+16)
	}
	w.out = append(w.out, w.doc[w.tail:to]...)
	w.tail = to
}

// items walks the items array and drops the hidden items, keeping the
// separators as Filter documents it.
func (w *walk) items() error {
	if c := w.peek(); c != '[' {
		return fmt.Errorf("member %q is %s, not an array", w.l.ItemsKey, kindName(kindOf(c)))
	}
	w.i++
	o := itemsOut{open: w.i, prevEnd: w.i, first: -1}
	for k := 0; ; k++ {
		w.ws()
		c := w.peek()
		if c == ']' {
			w.closeItems(&o, w.i)
			w.i++
			return nil
		}
		if k > 0 {
			if c != ',' {
				return errStructure
			}
			w.i++
			w.ws()
			c = w.peek()
		}
		if c != '{' {
			return fmt.Errorf("%s[%d] is %s, not an object", w.l.ItemsKey, k, kindName(kindOf(c)))
		}
		start := w.i
		name, err := w.item(k)
		if err != nil {
			return err
		}
		w.keepOrDrop(&o, k, start, w.i, name)
	}
}

// itemsOut is where the output of an items array stands.
type itemsOut struct {
	open     int  // just after '['
	prevEnd  int  // end of the previous item, or open
	first    int  // start of the first item, -1 before it
	explicit bool // an item was dropped: the array is written item by item
	wrote    bool // an item was written explicitly
}

// keepOrDrop asks about item k, doc[start:end] named name, and drops it or
// writes it as the output needs.
func (w *walk) keepOrDrop(o *itemsOut, k, start, end int, name string) {
	if o.first < 0 {
		o.first = start
	}
	switch {
	case w.hides(name, start, end):
		w.ed.Dropped++
		if !o.explicit {
			w.flush(o.prevEnd)
			o.explicit, o.wrote = true, k > 0
		}
	case o.explicit:
		if o.wrote {
			w.out = append(w.out, w.doc[o.prevEnd:start]...)
		} else {
			w.out = append(w.out, w.doc[o.open:o.first]...)
		}
		w.out = append(w.out, w.doc[start:end]...)
		o.wrote = true
	}
	o.prevEnd = end
}

// closeItems ends the items array, whose ']' is at doc[at].
func (w *walk) closeItems(o *itemsOut, at int) {
	if o.explicit {
		if o.wrote {
			w.out = append(w.out, w.doc[o.prevEnd:at]...)
		}
		w.tail = at
	}
}

// hides asks the caller about the item at doc[start:end].
func (w *walk) hides(name string, start, end int) bool {
	switch {
	case w.hideItem != nil:
		return w.hideItem(name, w.doc[start:end])
	case w.hide != nil:
		return w.hide(name)
	}
	return false
}

// item walks item k, an object at w.i, and returns its name.
func (w *walk) item(k int) (name string, err error) {
	w.i++ // '{'
	seen := false
	for first := true; ; first = false {
		key, ok, err := w.memberName(first)
		if err != nil {
			return "", err
		}
		if !ok {
			return name, nil
		}
		if !bytes.EqualFold(key, []byte(w.l.NameKey)) {
			if err := w.skip(); err != nil {
				return "", err
			}
			continue
		}
		if err := checkKey(key, w.l.NameKey, seen); err != nil {
			return "", fmt.Errorf("%s[%d]: %w", w.l.ItemsKey, k, err)
		}
		seen = true
		if w.peek() != '"' {
			name = ""
			if err := w.skip(); err != nil {
				return "", err
			}
			continue
		}
		s, e, err := w.str()
		if err != nil {
			return "", err
		}
		if name, err = w.name(s, e, w.escaped(s, e)); err != nil {
			return "", err
		}
	}
}

// name returns the string whose content is doc[s:e], unescaped: an alias
// of doc when it has no escapes and w.alias, else a copy.
func (w *walk) name(s, e int, escaped bool) (string, error) {
	switch {
	case escaped:
		u, err := w.unquote(s, e)
		if err != nil {
			return "", err
		}
		return string(u), nil
	case w.alias && e > s:
		return unsafe.String(&w.doc[s], e-s), nil
	}
	return string(w.doc[s:e]), nil
}

// memberName reads the next member name of the object being walked,
// unescaped (valid until the next call), and the colon after it; it
// returns false after the closing brace. first: no member was read yet.
func (w *walk) memberName(first bool) ([]byte, bool, error) {
	w.ws()
	c := w.peek()
	if c == '}' {
		w.i++
		return nil, false, nil
	}
	if !first {
		if c != ',' {
			return nil, false, errStructure
		}
		w.i++
		w.ws()
	}
	if w.peek() != '"' {
		return nil, false, errStructure
	}
	s, e, err := w.str()
	if err != nil {
		return nil, false, err
	}
	name := w.doc[s:e]
	if w.escaped(s, e) {
		if name, err = w.unquote(s, e); err != nil {
			return nil, false, err
		}
	}
	w.ws()
	if w.peek() != ':' {
		return nil, false, errStructure
	}
	w.i++
	w.ws()
	return name, true, nil
}

// unquote returns the unescaped content of the string doc[s-1:e+1], in
// w.unesc.
func (w *walk) unquote(s, e int) ([]byte, error) {
	u, err := jsontext.AppendUnquote(w.unesc[:0], w.doc[s-1:e+1])
	if err != nil {
		return nil, err
	}
	w.unesc = u
	return u, nil
}

// ws skips whitespace.
func (w *walk) ws() {
	for w.i < w.end {
		switch w.doc[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// peek returns the byte at w.i, or 0 at the end.
func (w *walk) peek() byte {
	if w.i < w.end {
		return w.doc[w.i]
	}
	return 0
}

// str reads the string at w.i (a quote) and returns the span of its
// content. Most strings are short: a byte loop beats bytes.IndexByte.
func (w *walk) str() (s, e int, err error) {
	s = w.i + 1
	for j := s; j < w.end; j++ {
		switch w.doc[j] {
		case '"':
			w.i = j + 1
			return s, j, nil
		case '\\':
			j++ // the escaped byte; a \u escape's digits are plain
		}
	}
	return 0, 0, errStructure
}

// escaped reports whether doc[s:e], a string's content, has escapes.
func (w *walk) escaped(s, e int) bool {
	return bytes.IndexByte(w.doc[s:e], '\\') >= 0
}

// skip steps over the value at w.i.
func (w *walk) skip() error {
	switch c := w.peek(); c {
	case '"':
		_, _, err := w.str()
		return err
	case '{', '[':
		return w.skipContainer()
	case 't', 'f', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		for w.i++; w.i < w.end; w.i++ {
			switch w.doc[w.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return nil
			}
		}
		return nil
	}
	return errStructure
}

// structural marks the bytes skipContainer stops at.
var structural = [256]bool{'"': true, '{': true, '[': true, '}': true, ']': true}

// skipContainer steps over the object or array at w.i, matching brackets
// outside strings.
func (w *walk) skipContainer() error {
	depth := 0
	for w.i < w.end {
		switch w.doc[w.i] {
		case '"':
			if _, _, err := w.str(); err != nil {
				return err
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				w.i++
				return nil
			}
		}
		w.i++
		for w.i < w.end && !structural[w.doc[w.i]] {
			w.i++
		}
	}
	return errStructure
}

// kindOf is the jsontext kind of a value that starts with c.
func kindOf(c byte) jsontext.Kind {
	switch c {
	case '{', '[', '"', 't', 'f', 'n':
		return jsontext.Kind(c)
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return '0'
	}
	return 0
}
