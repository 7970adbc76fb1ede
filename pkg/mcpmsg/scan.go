package mcpmsg

import (
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// MaxDepth is the deepest nesting of objects and arrays that Parse accepts
// (the top-level object or array counts as 1). It matches the limit of the
// MCP Go SDK's decoder, so nothing that reaches the server is deeper than
// what a Go server accepts.
const MaxDepth = 1000

// linearNames is the number of member names of one object compared pairwise
// before the scanner switches that object to a map of folded names.
const linearNames = 24

// scanner walks JSON that jsontext has already validated (syntax, UTF-8 and
// exact duplicate names). It adds what jsontext does not check: member names
// that are equal under Unicode case folding, and the nesting depth. It is
// written defensively: on input that is not valid JSON it returns an error,
// never panics, but it does not promise to detect every syntax error.
type scanner struct {
	b     []byte
	names []nameRef // member names of the objects being walked, a stack
	unesc []byte    // backing store of unescaped names
	depth int
	// skip makes value step over nested objects and arrays without
	// checking them: for input that a full scan has already checked.
	skip bool
}

// nameRef locates a member name: s.b[start:end], or s.unesc[start:end] for
// a name that had escapes. Offsets, not slices, so that a scratch array of
// them holds no pointers and appending to s.unesc cannot invalidate them.
type nameRef struct {
	start, end uint32
	unesc      bool
}

func (s *scanner) nameBytes(r nameRef) []byte {
	if r.unesc {
		return s.unesc[r.start:r.end]
	}
	return s.b[r.start:r.end]
}

// errScan is the reason a scan failed; it becomes an *Error.
type errScan struct {
	code   int
	reason string
}

// toError turns e into an *Error whose message reads "<kind>: <where><reason>".
func (e *errScan) toError(where string) *Error {
	return &Error{Code: e.code, Message: codeText(e.code) + ": " + where + e.reason}
}

func errTruncated() *errScan { return &errScan{CodeParseError, "unexpected end of JSON input"} }

// ws returns the index of the first non-whitespace byte at or after i.
func (s *scanner) ws(i int) int {
	for i < len(s.b) {
		switch s.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// str returns the end (one past the closing quote) of the string at i.
// A byte loop: most strings of MCP messages are short, and for them it
// beats bytes.IndexByte.
func (s *scanner) str(i int) (int, *errScan) {
	if i >= len(s.b) || s.b[i] != '"' {
		return 0, &errScan{CodeParseError, "string expected"}
	}
	for j := i + 1; j < len(s.b); j++ {
		switch s.b[j] {
		case '"':
			return j + 1, nil
		case '\\':
			j++ // the escaped byte (a \u escape's digits are plain)
		}
	}
	return 0, errTruncated()
}

// unquote returns the unescaped content of the string s.b[i:end] and where
// it is.
func (s *scanner) unquote(i, end int) ([]byte, nameRef, *errScan) {
	if end-i < 2 || end > len(s.b) {
		return nil, nameRef{}, &errScan{CodeParseError, "string expected"}
	}
	if !hasBackslash(s.b[i+1 : end-1]) {
		return s.b[i+1 : end-1], nameRef{start: uint32(i + 1), end: uint32(end - 1)}, nil
	}
	n := len(s.unesc)
	u, err := jsontext.AppendUnquote(s.unesc, s.b[i:end])
	if err != nil {
		return nil, nameRef{}, &errScan{CodeParseError, "invalid string"}
	}
	s.unesc = u
	return u[n:len(u):len(u)], nameRef{start: uint32(n), end: uint32(len(u)), unesc: true}, nil
}

// hasBackslash reports whether b, a short string's content, holds a
// backslash (a byte loop: for short strings it beats bytes.IndexByte).
func hasBackslash(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// value returns the end of the JSON value starting at i (i must not point at
// whitespace), checking every nested object for case-folded duplicate names.
func (s *scanner) value(i int) (int, *errScan) {
	if i >= len(s.b) {
		return 0, errTruncated()
	}
	switch c := s.b[i]; c {
	case '"':
		end, err := s.str(i)
		return end, err
	case '{':
		if s.skip {
			return s.skipContainer(i)
		}
		it, err := s.object(i)
		if err != nil {
			return 0, err
		}
		for {
			_, ok, err := it.next()
			if err != nil {
				return 0, err
			}
			if !ok {
				return it.end, nil
			}
		}
	case '[':
		if s.skip {
			return s.skipContainer(i)
		}
		it, err := s.array(i)
		if err != nil {
			return 0, err
		}
		for {
			_, _, ok, err := it.next()
			if err != nil {
				return 0, err
			}
			if !ok {
				return it.end, nil
			}
		}
	case 't', 'n':
		return s.literal(i, 4)
	case 'f':
		return s.literal(i, 5)
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			j := i + 1
			for j < len(s.b) {
				switch s.b[j] {
				case '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '.', 'e', 'E', '+', '-':
					j++
					continue
				}
				break
			}
			return j, nil
		}
		return 0, &errScan{CodeParseError, "invalid character"}
	}
}

// skipContainer returns the end of the object or array starting at i,
// matching brackets outside strings.
func (s *scanner) skipContainer(i int) (int, *errScan) {
	depth := 0
	for j := i; j < len(s.b); j++ {
		switch s.b[j] {
		case '"':
			end, err := s.str(j)
			if err != nil {
				return 0, err
			}
			j = end - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, errTruncated()
}

func (s *scanner) literal(i, n int) (int, *errScan) {
	if i+n > len(s.b) {
		return 0, errTruncated()
	}
	return i + n, nil
}

func (s *scanner) enter() *errScan {
	s.depth++
	if s.depth > MaxDepth {
		return &errScan{CodeInvalidRequest, "JSON nested deeper than the limit"}
	}
	return nil
}

// quoteShort quotes b as a JSON string, shortened to keep error messages
// small.
func quoteShort(b []byte) string {
	const max = 64
	if len(b) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		q, _ := jsontext.AppendQuote(nil, b[:cut])
		return string(q) + "…"
	}
	q, _ := jsontext.AppendQuote(nil, b)
	return string(q)
}
