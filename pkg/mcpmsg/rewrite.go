package mcpmsg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// Errors of the rewriters, for errors.Is.
var (
	// ErrInvalidValue: a replacement is not a strictly valid JSON value (as
	// Parse defines it).
	ErrInvalidValue = errors.New("mcpmsg: replacement is not valid JSON")
	// ErrNotObject: the params to rewrite are not a JSON object.
	ErrNotObject = errors.New("mcpmsg: params are not an object")
	// ErrNoResult: the message has no result to replace.
	ErrNoResult = errors.New("mcpmsg: message has no result")
	// ErrInvalidMessage: the message's Raw is not a valid JSON-RPC message.
	ErrInvalidMessage = errors.New("mcpmsg: invalid message")
)

// ReplaceParams returns m re-encoded with some members of its params set:
// set maps a member name to its new raw JSON value, or to nil to remove the
// member. Members not in set keep their bytes and order; a name in set that
// equals an existing name ignoring case replaces that member (name
// included); new names are appended in sorted order. Everything outside
// params (jsonrpc, id, method, unknown members, whitespace) is kept byte for
// byte. A message without params gets a params object.
func ReplaceParams(m Message, set map[string][]byte) ([]byte, error) {
	for k, v := range set {
		if v != nil && !validValue(v) {
			return nil, fmt.Errorf("replace params %q: %w", k, ErrInvalidValue)
		}
	}
	start, end, members, found, err := locate(m, "params", m.Params, m.paramsAt)
	if err != nil {
		return nil, fmt.Errorf("replace params: %w", err)
	}
	var old []byte
	if found {
		old = m.Raw[start:end]
		if old[0] != '{' {
			return nil, fmt.Errorf("replace params: %w", ErrNotObject)
		}
	}
	params, err := setMembers(old, set)
	if err != nil {
		return nil, fmt.Errorf("replace params: %w", err)
	}
	if found {
		return splice(m.Raw, start, end, params), nil
	}
	// Insert "params" before the closing brace of the message (locate
	// validated m.Raw as an object).
	c := bytes.LastIndexByte(m.Raw, '}')
	out := make([]byte, 0, len(m.Raw)+len(params)+12)
	out = append(out, m.Raw[:c]...)
	if members > 0 {
		out = append(out, ',')
	}
	out = append(out, `"params":`...)
	out = append(out, params...)
	return append(out, m.Raw[c:]...), nil
}

// ReplaceResult returns m, a response, re-encoded with result as its result;
// every other byte of m is kept.
func ReplaceResult(m Message, result []byte) ([]byte, error) {
	if !validValue(result) {
		return nil, fmt.Errorf("replace result: %w", ErrInvalidValue)
	}
	return ReplaceValidResult(m, result)
}

// ReplaceValidResult is [ReplaceResult] for a result known to be valid
// JSON, so not checked again: one derived from m's own result (which Parse
// validated) by removing whole array elements. Never pass it what a plugin
// or a peer wrote.
func ReplaceValidResult(m Message, result []byte) ([]byte, error) {
	start, end, _, found, err := locate(m, "result", m.Result, m.resultAt)
	if err != nil {
		return nil, fmt.Errorf("replace result: %w", err)
	}
	if !found {
		return nil, fmt.Errorf("replace result: %w", ErrNoResult)
	}
	return splice(m.Raw, start, end, result), nil
}

// ResultSpan returns where m's result lies in m.Raw: m.Raw[start:end] is
// m.Result, as Parse recorded it. It reports false when m has no result,
// or m.Result is no longer that part of m.Raw (m was built by hand or
// changed).
func (m *Message) ResultSpan() (start, end int, ok bool) {
	at, val := m.resultAt, m.Result
	if at > 0 && len(val) > 0 && at+len(val) <= len(m.Raw) && &m.Raw[at] == &val[0] {
		return at, at + len(val), true
	}
	return 0, 0, false
}

// Join encodes a body from b's messages, substituting replaced[i] for
// b.Messages[i]. With no replacement it returns b.Raw unchanged (no copy); a
// single message (not a batch) that was replaced is returned as is. A batch
// keeps every byte outside the replaced elements when b came from Parse;
// otherwise it is rebuilt as "[m0,m1,…]".
func Join(b *Body, replaced map[int][]byte) []byte {
	n := 0
	for i := range replaced {
		if i >= 0 && i < len(b.Messages) {
			n++
		}
	}
	if n == 0 && b.Raw != nil {
		return b.Raw
	}
	if !b.Batch && len(b.Messages) == 1 {
		if r, ok := replaced[0]; ok {
			return r
		}
		return b.Messages[0].Raw
	}
	elem := func(i int) []byte {
		if r, ok := replaced[i]; ok {
			return r
		}
		return b.Messages[i].Raw
	}
	size := len(b.Raw) + len(b.Messages) + 2
	for i := range replaced {
		if i >= 0 && i < len(b.Messages) {
			size += len(replaced[i])
		}
	}
	out := make([]byte, 0, size)
	if spansMatch(b) {
		prev := 0
		for i, m := range b.Messages {
			out = append(out, b.Raw[prev:m.bodyAt]...)
			out = append(out, elem(i)...)
			prev = m.bodyAt + len(m.Raw)
		}
		return append(out, b.Raw[prev:]...)
	}
	out = append(out, '[')
	for i := range b.Messages {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, elem(i)...)
	}
	return append(out, ']')
}

// spansMatch reports whether every message of b still is the sub-slice of
// b.Raw that Parse recorded, in order.
func spansMatch(b *Body) bool {
	prev := 0
	for _, m := range b.Messages {
		if len(m.Raw) == 0 || m.bodyAt < prev || m.bodyAt+len(m.Raw) > len(b.Raw) || &b.Raw[m.bodyAt] != &m.Raw[0] {
			return false
		}
		prev = m.bodyAt + len(m.Raw)
	}
	return true
}

// ErrorResponse builds
// {"jsonrpc":"2.0","id":<id or null>,"error":{"code":..,"message":..,"data":<data>}}.
// id is raw JSON (as in Message.ID); one that is not a JSON string or number
// becomes null. data is omitted when nil or when encoding/json cannot
// marshal it; pass json.RawMessage to embed raw JSON.
func ErrorResponse(id []byte, code int, message string, data any) []byte {
	out := make([]byte, 0, 64+len(id)+len(message))
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	if validID(id) {
		out = append(out, bytes.TrimSpace(id)...)
	} else {
		out = append(out, "null"...)
	}
	out = append(out, `,"error":{"code":`...)
	out = strconv.AppendInt(out, int64(code), 10)
	out = append(out, `,"message":`...)
	// AppendQuote replaces invalid UTF-8 with U+FFFD and reports it; the
	// output is valid either way.
	out, _ = jsontext.AppendQuote(out, message)
	if data != nil {
		if d, err := json.Marshal(data); err == nil {
			out = append(out, `,"data":`...)
			out = append(out, d...)
		}
	}
	return append(out, "}}"...)
}

// validID reports whether id is a JSON string or number.
func validID(id []byte) bool {
	id = bytes.TrimSpace(id)
	if len(id) == 0 {
		return false
	}
	switch c := id[0]; {
	case c == '"' || c == '-' || (c >= '0' && c <= '9'):
		return jsontext.Value(id).IsValid()
	}
	return false
}

// validValue reports whether v is one JSON value as strict as Parse wants
// it: valid, no duplicate or case-folded duplicate names, not too deep.
func validValue(v []byte) bool {
	if precheck(v) != nil {
		return false
	}
	s := scanner{b: v} // it validates as it walks
	end, err := s.value(s.ws(0))
	return err == nil && s.ws(end) == len(v)
}

// locate returns the span in m.Raw of the value of the top-level member
// name, and the number of members of m.Raw when it had to walk it. val and
// at are what Parse recorded (at is -1 when absent, and never 0 for a value
// inside an object); when they no longer match m.Raw (m was built by hand or
// modified), m.Raw is validated and walked instead.
func locate(m Message, name string, val []byte, at int) (start, end, members int, found bool, err error) {
	if at > 0 && len(val) > 0 && at+len(val) <= len(m.Raw) && &m.Raw[at] == &val[0] {
		return at, at + len(val), 0, true, nil
	}
	if checkJSON(m.Raw) != nil {
		return 0, 0, 0, false, ErrInvalidMessage
	}
	s := scanner{b: m.Raw}
	i := s.ws(0)
	if m.Raw[i] != '{' {
		return 0, 0, 0, false, ErrInvalidMessage
	}
	it, e := s.object(i)
	if e != nil {
		return 0, 0, 0, false, ErrInvalidMessage
	}
	for {
		mem, ok, e := it.next()
		if e != nil {
			return 0, 0, 0, false, ErrInvalidMessage
		}
		if !ok {
			return start, end, members, found, nil
		}
		members++
		if string(mem.name) == name {
			start, end, found = mem.vStart, mem.vEnd, true
		}
	}
}

// splice returns raw with raw[start:end] replaced by v, in a new slice.
func splice(raw []byte, start, end int, v []byte) []byte {
	out := make([]byte, 0, len(raw)-(end-start)+len(v))
	out = append(out, raw[:start]...)
	out = append(out, v...)
	return append(out, raw[end:]...)
}

// setMembers returns the object obj (nil: an empty object) with the members
// of set replaced, removed (nil value) or appended.
func setMembers(obj []byte, set map[string][]byte) ([]byte, error) {
	out := make([]byte, 0, len(obj)+64)
	out = append(out, '{')
	done := make(map[string]bool, len(set))
	n := 0
	sep := func() {
		if n > 0 {
			out = append(out, ',')
		}
		n++
	}
	if obj != nil {
		s := scanner{b: obj, skip: true}
		it, e := s.object(0)
		if e != nil {
			return nil, ErrNotObject
		}
		for {
			mem, ok, e := it.next()
			if e != nil {
				return nil, ErrNotObject
			}
			if !ok {
				break
			}
			key, exact := matchKey(set, mem.name)
			if key == "" && !exact {
				sep()
				out = append(out, obj[mem.nStart:mem.vEnd]...)
				continue
			}
			done[key] = true
			v := set[key]
			if v == nil {
				continue
			}
			sep()
			if exact {
				out = append(out, obj[mem.nStart:mem.vStart]...)
			} else {
				out, _ = jsontext.AppendQuote(out, key)
				out = append(out, ':')
			}
			out = append(out, v...)
		}
	}
	keys := make([]string, 0, len(set))
	for k, v := range set {
		if !done[k] && v != nil {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		sep()
		out, _ = jsontext.AppendQuote(out, k)
		out = append(out, ':')
		out = append(out, set[k]...)
	}
	return append(out, '}'), nil
}

// matchKey finds the key of set that name matches: exactly (exact true), or
// ignoring case. It returns "", false when none does.
func matchKey(set map[string][]byte, name []byte) (key string, exact bool) {
	if _, ok := set[string(name)]; ok {
		return string(name), true
	}
	for k := range set {
		if foldEqual([]byte(k), name) {
			return k, false
		}
	}
	return "", false
}
