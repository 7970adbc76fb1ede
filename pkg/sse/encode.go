package sse

import "bytes"

// AppendEvent appends a new event to dst: an "event" line when typ is not
// empty, data as "data: " lines (split at line breaks, which a data line
// cannot carry), and the blank line that ends the event. Lines end with LF.
// typ must not contain a line break.
func AppendEvent(dst []byte, typ string, data []byte) []byte {
	if typ != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, typ...)
		dst = append(dst, '\n')
	}
	dst = appendData(dst, data, true, lf, lf)
	return append(dst, '\n')
}

var lf = []byte("\n")

// WithData returns the event's bytes with its data replaced: the new data,
// split into lines at "\n" (and at CR, which SSE cannot carry inside a
// line), takes the place of the first data line, the other data lines are
// dropped, and every other line, line ending and the blank line are kept.
// The new lines use the first data line's line ending and its "data:" or
// "data: " style; an event without data gets them before its blank line.
// nil data removes the data lines. The result is a new slice.
func (e Event) WithData(data []byte) []byte {
	raw := e.Raw
	out := make([]byte, 0, len(raw)+len(data)+16)
	out = append(out, raw[:e.bom]...)
	ls := lines{s: scan{b: raw, cr: -1}, i: e.bom}
	wrote := data == nil
	lastEnd := []byte("\n")
	for {
		l, ok := ls.next()
		if !ok {
			break
		}
		ln, nl := raw[l.start:l.end], raw[l.end:l.next]
		if len(nl) > 0 {
			lastEnd = nl
		}
		switch {
		case len(ln) == 0: // the blank line
			if !wrote {
				out = appendData(out, data, true, nl, nl)
				wrote = true
			}
			out = appendLine(out, raw[l.start:l.next])
		case isData(ln):
			if !wrote {
				sep := nl
				if len(sep) == 0 {
					sep = lastEnd
				}
				out = appendData(out, data, bytes.HasPrefix(ln, []byte("data: ")), sep, nl)
				wrote = true
			}
		default:
			out = appendLine(out, raw[l.start:l.next])
		}
	}
	if !wrote { // unterminated, without data lines
		if n := len(out); n > e.bom && out[n-1] != '\n' && out[n-1] != '\r' {
			out = append(out, lastEnd...)
		}
		out = appendData(out, data, true, lastEnd, lastEnd)
	}
	if e.bom == 0 && bytes.HasPrefix(out, []byte(bom)) {
		// Removing the data lines brought a line starting with U+FEFF to
		// the front; at the start of a stream it would read as a byte
		// order mark and change that line's field name. A comment line
		// keeps it where it was: not first.
		out = append(append([]byte(":"), lastEnd...), out...)
	}
	return out
}

// appendLine appends a line with its terminator. Dropped data lines can
// bring a line ending in a lone CR next to one starting with LF, which a
// parser would read as one CRLF; the CR then becomes a CRLF itself so the
// lines stay apart.
func appendLine(out, line []byte) []byte {
	if n := len(out); n > 0 && out[n-1] == '\r' && len(line) > 0 && line[0] == '\n' {
		out = append(out, '\n')
	}
	return append(out, line...)
}

func isData(ln []byte) bool {
	return bytes.HasPrefix(ln, []byte("data")) && (len(ln) == 4 || ln[4] == ':')
}

// appendData appends data as data lines, each ended by sep except the last,
// ended by last.
func appendData(out, data []byte, space bool, sep, last []byte) []byte {
	for {
		k := bytes.IndexAny(data, "\r\n")
		part := data
		if k >= 0 {
			part = data[:k]
		}
		out = append(out, "data:"...)
		if space || (len(part) > 0 && part[0] == ' ') {
			out = append(out, ' ')
		}
		out = append(out, part...)
		if k < 0 {
			return append(out, last...)
		}
		out = append(out, sep...)
		if data[k] == '\r' && k+1 < len(data) && data[k+1] == '\n' {
			k++
		}
		data = data[k+1:]
	}
}
