package sse

import "bytes"

// lineState is the scan state at the end of the bytes seen of an event.
type lineState struct {
	empty   bool // the current line has no byte yet
	afterCR bool // the last byte ended a non-blank line with CR: a LF next belongs to it
}

// scan finds line endings in b, caching where the next CR is so that a
// stream without CR is searched for LF only.
type scan struct {
	b  []byte
	cr int // index of the next CR at or after the last search, len(b) if none; -1 unknown
}

// nextTerm returns the index of the first CR or LF at or after i, or -1.
func (s *scan) nextTerm(i int) int {
	if s.cr < i {
		if k := bytes.IndexByte(s.b[i:], '\r'); k >= 0 {
			s.cr = i + k
		} else {
			s.cr = len(s.b)
		}
	}
	if k := bytes.IndexByte(s.b[i:s.cr], '\n'); k >= 0 {
		return i + k
	}
	if s.cr < len(s.b) {
		return s.cr
	}
	return -1
}

// findEnd continues scanning an event at i with state st and returns the end
// of the event (one past its blank line), or ok false with st updated when b
// ends first. A blank line ending in CR at the very end of b ends the event
// at once; a LF that follows in the next chunk then reads as an empty event
// of its own, which changes nothing for a client.
func (s *scan) findEnd(i int, st *lineState) (end int, ok bool) {
	b := s.b
	for i < len(b) {
		if st.afterCR {
			st.afterCR = false
			if b[i] == '\n' {
				i++
				continue
			}
		}
		j := s.nextTerm(i)
		if j < 0 {
			st.empty = false
			return 0, false
		}
		if j > i {
			st.empty = false
		}
		if st.empty {
			end = j + 1
			if b[j] == '\r' && end < len(b) && b[end] == '\n' {
				end++
			}
			return end, true
		}
		st.empty = true
		st.afterCR = b[j] == '\r'
		i = j + 1
	}
	return 0, false
}

// line is one line of an event: b[start:end] is its content and
// b[end:next] its line ending (empty for a last line without one).
type line struct{ start, end, next int }

// lines iterates over the lines of an event.
type lines struct {
	s scan
	i int
}

func (l *lines) next() (line, bool) {
	b := l.s.b
	if l.i >= len(b) {
		return line{}, false
	}
	start := l.i
	j := l.s.nextTerm(start)
	if j < 0 {
		l.i = len(b)
		return line{start, len(b), len(b)}, true
	}
	next := j + 1
	if b[j] == '\r' && next < len(b) && b[next] == '\n' {
		next++
	}
	l.i = next
	return line{start, j, next}, true
}

// field splits a non-comment line into its name and value.
func field(ln []byte) (name, value []byte) {
	c := bytes.IndexByte(ln, ':')
	if c < 0 {
		return ln, ln[len(ln):]
	}
	value = ln[c+1:]
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	return ln[:c], value
}
