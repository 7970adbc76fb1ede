package logsafe

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"unicode/utf8"
)

// MaxLine bounds a log line written through [Writer]: every line, its
// newline included, is shorter than MaxLine bytes.
const MaxLine = 16 << 10

// Writer passes log lines to an underlying writer, shortening any line of
// MaxLine bytes or more. A JSON object line (zerolog's output) keeps its
// keys and stays valid JSON: its longest string values are cut with [Cap]
// until the line fits; if that is not enough (huge nested values, thousands
// of keys) the line is replaced by a JSON object holding the original
// line's start and its length. Any other line is cut at a rune boundary and
// ends with the truncation marker and a newline.
//
// Writer keeps no state: it is safe for concurrent use when the underlying
// writer is, as zerolog expects of its output.
type Writer struct {
	w     io.Writer
	limit int // every line, newline included, is at most limit bytes
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w, limit: MaxLine - 1} }

// Write writes p, one call to the underlying writer, with every line of it
// bounded. It reports len(p) on success, as zerolog requires of a writer
// that does not fail.
func (lw *Writer) Write(p []byte) (int, error) {
	if len(p) < lw.limit && !longLine(p, lw.limit) {
		if _, err := lw.w.Write(p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	var out []byte
	rest := p
	for len(rest) > 0 {
		line, tail, found := bytes.Cut(rest, []byte("\n"))
		rest = tail
		out = append(out, lw.bound(line)...)
		if found || len(line) > 0 {
			out = append(out, '\n')
		}
	}
	if _, err := lw.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// longLine reports whether a line of p (without its newline) needs cutting.
func longLine(p []byte, limit int) bool {
	for len(p) > 0 {
		line, tail, _ := bytes.Cut(p, []byte("\n"))
		if len(line) >= limit {
			return true
		}
		p = tail
	}
	return false
}

// bound returns line (without its newline) shortened to fit in limit-1 bytes.
func (lw *Writer) bound(line []byte) []byte {
	room := lw.limit - 1 // the newline
	if len(line) <= room {
		return line
	}
	if out, ok := shrinkJSON(line, room); ok {
		return out
	}
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return replacement(line, room)
	}
	return []byte(Cap(string(line), room-len(marker(len(line)))))
}

// field is one key and raw value of a JSON object line.
type field struct {
	key []byte // encoded, with quotes
	val []byte // encoded
	str string // the decoded value, when it is a string
	isS bool
}

// shrinkJSON cuts the longest string values of a one-level JSON object
// until it fits in room bytes. ok is false when line is not a JSON object
// or cutting strings is not enough.
func shrinkJSON(line []byte, room int) ([]byte, bool) {
	fields, ok := parseObject(line)
	if !ok {
		return nil, false
	}
	size := 1 // "}"
	for _, f := range fields {
		size += len(f.key) + 1 + len(f.val) + 1 // key:val, or {
	}
	order := make([]int, 0, len(fields))
	for i, f := range fields {
		if f.isS {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return len(fields[b].val) - len(fields[a].val) })
	for _, i := range order {
		if size <= room {
			break
		}
		f := &fields[i]
		keep := max(len(f.str)-(size-room)-len(marker(len(f.str))), 0)
		var enc []byte
		for {
			enc = encodeString(Cap(f.str, keep))
			over := size - len(f.val) + len(enc) - room
			if over <= 0 || keep == 0 {
				break
			}
			keep = max(keep-over, 0) // escaping made it longer than planned
		}
		size += len(enc) - len(f.val)
		f.val = enc
	}
	if size > room {
		return nil, false
	}
	out := make([]byte, 0, size)
	for i, f := range fields {
		if i == 0 {
			out = append(out, '{')
		} else {
			out = append(out, ',')
		}
		out = append(append(append(out, f.key...), ':'), f.val...)
	}
	if len(fields) == 0 {
		out = append(out, '{')
	}
	return append(out, '}'), true
}

// parseObject splits a JSON object into its fields, keeping each raw.
func parseObject(line []byte) ([]field, bool) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var fields []field
	for dec.More() {
		t, err := dec.Token()
		k, isKey := t.(string)
		if err != nil || !isKey {
			return nil, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		f := field{key: encodeString(k), val: raw}
		if len(raw) > 0 && raw[0] == '"' {
			if err := json.Unmarshal(raw, &f.str); err != nil {
				return nil, false
			}
			f.isS = true
		}
		fields = append(fields, f)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // trailing data
	}
	return fields, true
}

// encodeString encodes s as a JSON string without HTML escaping. Invalid
// UTF-8 becomes U+FFFD, as encoding/json does.
func encodeString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// replacement is the JSON object that stands for a line too large to
// shrink: the start of the original line as a string, and its length.
func replacement(line []byte, room int) []byte {
	keep := room / 2
	for {
		m := map[string]any{
			"level":          "warn",
			"message":        "log line too large; replaced by its start",
			"original_bytes": len(line),
			"original_start": validPrefix(line, keep),
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(m); err == nil && b.Len()-1 <= room {
			return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		}
		if keep == 0 {
			return []byte("{}")
		}
		keep /= 2
	}
}

// validPrefix is the string of line's first n bytes, at a rune boundary.
func validPrefix(line []byte, n int) string {
	n = min(n, len(line))
	for n > 0 && n < len(line) && !utf8.RuneStart(line[n]) {
		n--
	}
	return string(line[:n])
}
