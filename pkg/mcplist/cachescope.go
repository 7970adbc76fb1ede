package mcplist

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// MCP 2026-07-28 lets a list result (and resources/read, server/discover)
// carry caching hints: ttlMs, how long a client may reuse it, and
// cacheScope, "public" (the same for every caller: any client or shared
// cache may serve it to anyone) or "private" (this caller's alone). A list
// the sidecar filters is this caller's view: were it left "public", a
// shared cache in front of the sidecar could serve one caller's list to
// another, hidden items included.

// PrivateCacheScope returns result (a list result, already checked as
// JSON) with every top-level cacheScope member (names compared ignoring
// case, as lenient clients read them) whose value is not "private" set to
// "private", and whether it changed anything. Everything else is kept byte
// for byte; result itself is returned when nothing changes.
func PrivateCacheScope(result []byte) (out []byte, changed bool, err error) {
	if !containsFoldASCII(result, "cope") && !bytes.Contains(result, []byte(`\u`)) {
		return result, false, nil // no member can be named cacheScope
	}
	dec := jsontext.NewDecoder(bytes.NewReader(result), jsontext.AllowDuplicateNames(true))
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, false, fmt.Errorf("mcplist: cacheScope: %w", err)
	}
	if tok.Kind() != '{' {
		return nil, false, fmt.Errorf("mcplist: cacheScope: result is %s, not an object", kindName(tok.Kind()))
	}
	const private = `"private"`
	tail := 0
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, false, fmt.Errorf("mcplist: cacheScope: %w", err)
		}
		isScope := strings.EqualFold(tok.String(), "cacheScope") // before the next read voids tok
		v, err := dec.ReadValue()
		if err != nil {
			return nil, false, fmt.Errorf("mcplist: cacheScope: %w", err)
		}
		if !isScope || string(v) == private {
			continue
		}
		end := int(dec.InputOffset())
		start := end - len(v)
		if out == nil {
			out = make([]byte, 0, len(result)+len(private))
		}
		out = append(append(out, result[tail:start]...), private...)
		tail = end
	}
	if out == nil {
		return result, false, nil
	}
	return append(out, result[tail:]...), true, nil
}

// containsFoldASCII reports whether b holds word (lower-case ASCII letters
// with no other simple case folds) in any mix of cases, without
// allocating.
func containsFoldASCII(b []byte, word string) bool {
	for i := 0; i+len(word) <= len(b); i++ {
		j := 0
		for j < len(word) && b[i+j]|0x20 == word[j] {
			j++
		}
		if j == len(word) {
			return true
		}
	}
	return false
}
