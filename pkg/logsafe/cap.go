// Package logsafe keeps log output bounded whatever a client sends.
//
// Header values, paths, JSON-RPC ids and tool names reach log lines from
// requests a client controls; Envoy lets a single header value reach 60 KiB
// and a body can be much larger. [Cap] shortens one such field, visibly: the
// cut text ends with a marker that says how many bytes were dropped, so a
// reader knows the value was longer and by how much. [Writer] is the last
// line of defence: wrapped around zerolog's output, it guarantees that every
// log line stays under [MaxLine] bytes, whatever fields it carries, keeping
// the line valid JSON.
package logsafe

import (
	"strconv"
	"unicode/utf8"
)

// DefaultCap is the length, in bytes, a log field carrying client input is
// cut to: long enough for any legitimate request id, trace header, method,
// tool name or session id, short enough that a dozen such fields fit in a
// line several times over.
const DefaultCap = 512

// Cap returns s when it is at most n bytes long. Otherwise it returns the
// longest prefix of s of at most n bytes that does not split a UTF-8
// sequence, followed by a marker "…[truncated N bytes]" where N counts the
// bytes left out. A negative n counts as 0.
func Cap(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n, 0)
	// Step back over continuation bytes so no rune is split: at most
	// utf8.UTFMax-1 of them. Invalid bytes are kept as they are.
	for i := 0; i < utf8.UTFMax-1 && cut > 0 && cut < len(s) && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	if cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut = max(n, 0) // not UTF-8 here: cut at n
	}
	return s[:cut] + marker(len(s)-cut)
}

// marker is the text that replaces n dropped bytes.
func marker(n int) string {
	return "…[truncated " + strconv.Itoa(n) + " bytes]"
}
