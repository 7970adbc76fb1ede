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

// scanner walks JSON and validates it as it goes: syntax, UTF-8 and
// escapes as jsontext checks them (RFC 8259 and RFC 7493: no lone surrogate
// escapes, no invalid UTF-8, no duplicate member names), plus what jsontext
// does not check: member names that are equal under Unicode case folding,
// and the nesting depth. Input it accepts is valid JSON; on input that is
// not, it returns an error, never panics. Its error is the first problem
// on the way, syntax or not; Parse asks jsontext to explain invalid input
// (the slow path).
type scanner struct {
	b     []byte
	names []nameRef // member names of the objects being walked, a stack
	unesc []byte    // backing store of unescaped names
	depth int
	// skip makes value step over nested objects and arrays without
	// checking them: for input that a full scan has already checked.
	// Scalars are still checked.
	skip bool
	// indexing makes message index a result that is a list of keys
	// (ParseList); list is the index of the message being scanned, and
	// spare the Body's room for the first one.
	indexing bool
	keys     ListKeys
	list     *ListIndex
	spare    *ListIndex
}

// nameRef locates a member name: s.b[start:end], or s.unesc[start:end] for
// a name that had escapes. Offsets, not slices, so that a scratch array of
// them holds no pointers and appending to s.unesc cannot invalidate them.
type nameRef struct {
	start, end uint32
	unesc      bool
	// key is foldKey of the name: two names equal ignoring case have the
	// same key, or one of them has key fullCompare.
	key uint32
}

// fullCompare is the key of a name compared byte by byte with every other:
// one with an escape or a byte outside ASCII ('K' U+212A KELVIN SIGN folds
// to 'k'), or too long for a key.
const fullCompare = 1 << 31

// foldKey returns the key of a member name, by what str said of it: its
// length and its first and last bytes in upper case, for an ASCII name
// without escapes (two such names are equal ignoring case only if both
// are equal in upper case, so their keys are too); else fullCompare.
func foldKey(name []byte, info strInfo) uint32 {
	if info != 0 || len(name) > 0xffff {
		return fullCompare
	}
	if len(name) == 0 {
		return 0
	}
	return uint32(len(name))<<16 | uint32(upperASCII(name[0]))<<8 | uint32(upperASCII(name[len(name)-1]))
}

// upperASCII returns c in upper case, for an ASCII letter.
func upperASCII(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
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

// strInfo is what str saw in a string, a bit each.
type strInfo uint8

const (
	strEscaped  strInfo = 1 << iota // a backslash escape
	strNonASCII                     // a byte outside ASCII
)

// str returns the end (one past the closing quote) of the string at i, and
// whether it holds an escape or a byte outside ASCII. It checks the
// string: no control character, only JSON's escapes, a \u escape of a
// surrogate half only in a pair (high then low), valid UTF-8. A byte loop:
// most strings of MCP messages are short, and for them it beats
// bytes.IndexByte.
func (s *scanner) str(i int) (end int, info strInfo, err *errScan) {
	b := s.b
	if i >= len(b) || b[i] != '"' {
		return 0, 0, &errScan{CodeParseError, "string expected"}
	}
	j := i + 1
	for j < len(b) {
		c := b[j]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			j++
			continue
		}
		switch {
		case c == '"':
			return j + 1, info, nil
		case c == '\\':
			n := escapeLen(b[j:])
			if n == 0 {
				return 0, 0, &errScan{CodeParseError, "invalid escape in string"}
			}
			info |= strEscaped
			j += n
		case c < 0x20:
			return 0, 0, &errScan{CodeParseError, "control character in string"}
		default:
			r, n := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && n == 1 {
				return 0, 0, &errScan{CodeParseError, "invalid UTF-8 in string"}
			}
			info |= strNonASCII
			j += n
		}
	}
	return 0, 0, errTruncated()
}

// escapeLen returns the length of the escape sequence that starts b (b[0]
// is a backslash), or 0 when it is not a valid one. A \u escape of a high
// surrogate must be followed by one of a low surrogate; a low one alone is
// invalid (jsontext refuses both, as RFC 7493 wants).
func escapeLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		r, ok := hex4(b[2:])
		switch {
		case !ok || (r >= 0xdc00 && r <= 0xdfff):
			return 0
		case r < 0xd800 || r > 0xdbff:
			return 6
		}
		if len(b) < 12 || b[6] != '\\' || b[7] != 'u' {
			return 0
		}
		if lo, ok := hex4(b[8:]); !ok || lo < 0xdc00 || lo > 0xdfff {
			return 0
		}
		return 12
	}
	return 0
}

// hex4 returns the value of the four hexadecimal digits that start b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// skipStr returns the end of the string at i, which a full scan has
// already checked.
func (s *scanner) skipStr(i int) (int, *errScan) {
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
	return s.unquoteAs(i, end, hasBackslash(s.b[i+1:end-1]))
}

// unquoteAs is unquote for a string that str said holds an escape or not.
func (s *scanner) unquoteAs(i, end int, escaped bool) ([]byte, nameRef, *errScan) {
	if !escaped {
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
		end, _, err := s.str(i)
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
	case 't':
		return s.literal(i, "true")
	case 'n':
		return s.literal(i, "null")
	case 'f':
		return s.literal(i, "false")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return s.number(i)
		}
		return 0, &errScan{CodeParseError, "invalid character"}
	}
}

// number returns the end of the number at i, checking its grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?. What follows it is the
// caller's to check.
func (s *scanner) number(i int) (int, *errScan) {
	b := s.b
	j := i
	if b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && b[j] >= '1' && b[j] <= '9':
		j = digits(b, j+1)
	default:
		return 0, &errScan{CodeParseError, "invalid number"}
	}
	if j < len(b) && b[j] == '.' {
		k := digits(b, j+1)
		if k == j+1 {
			return 0, &errScan{CodeParseError, "invalid number"}
		}
		j = k
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		k := digits(b, j)
		if k == j {
			return 0, &errScan{CodeParseError, "invalid number"}
		}
		j = k
	}
	return j, nil
}

// digits returns the index of the first byte at or after i of b that is
// not a decimal digit.
func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// skipContainer returns the end of the object or array starting at i,
// matching brackets outside strings.
func (s *scanner) skipContainer(i int) (int, *errScan) {
	depth := 0
	for j := i; j < len(s.b); j++ {
		switch s.b[j] {
		case '"':
			end, err := s.skipStr(j)
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

// literal returns the end of the literal lit (true, false, null) at i.
func (s *scanner) literal(i int, lit string) (int, *errScan) {
	if len(s.b)-i < len(lit) {
		return 0, errTruncated()
	}
	if string(s.b[i:i+len(lit)]) != lit {
		return 0, &errScan{CodeParseError, "invalid literal"}
	}
	return i + len(lit), nil
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
