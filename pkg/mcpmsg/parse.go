package mcpmsg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// bom is the UTF-8 encoding of U+FEFF.
const bom = "\xef\xbb\xbf"

// Parse validates body strictly and splits it into messages. Errors are
// *Error with code CodeParseError (not JSON, not UTF-8, a byte order mark,
// trailing data), CodeInvalidRequest (not an object or a non-empty array of
// objects, duplicate or case-folded duplicate member names, a bad envelope,
// a hooked method sent as a notification) or CodeInvalidParams (bad params
// of tools/call, prompts/get or resources/read).
//
// Envelope rules: "jsonrpc" must be "2.0"; "id" a string or a number (null
// only in an error response; a request's number a plain safe integer, see
// [CanonicalID]); "method" a string, compared exactly after
// unescaping; "params" an object or an array; a message has either a method
// or exactly one of "result" and "error" (an object). A result needs an id;
// an error may lack one (ID nil), as the TypeScript SDK sends it. Other
// members are kept and ignored.
//
// Hooked methods: tools/call and prompts/get need params.name (string) and
// an optional params.arguments (object; for prompts/get its values must be
// strings); resources/read needs params.uri (string). They must carry an id.
//
// Parse reads body once: the scan that splits it also validates it. Only
// invalid input is read again, by jsontext, to report the same error
// whatever the order of the problems: a syntax error anywhere in the body
// comes before a JSON-RPC or MCP rule.
func Parse(body []byte) (*Body, error) {
	if err := precheck(body); err != nil {
		return nil, err
	}
	b, err := scanBody(body, ListKeys{}, false)
	if err != nil {
		if e := checkJSON(body); e != nil {
			return nil, e
		}
		return nil, err
	}
	return b, nil
}

// scanBody splits and validates body, which precheck accepted, in one pass.
// Its error is the first problem met, syntax or not. With keys, list
// results are indexed (ParseList).
func scanBody(body []byte, keys ListKeys, indexing bool) (*Body, *Error) {
	b := &Body{Raw: body}
	s := scanner{b: body, names: b.scratch[:0], indexing: indexing, keys: keys}
	if indexing {
		s.spare = &b.list
	}
	i := s.ws(0)
	switch body[i] {
	case '{':
		m, end, err := s.message(i)
		if err != nil {
			e := err.toError("")
			if err.code == CodeInvalidParams && m.Kind == KindRequest {
				e.ID = m.ID
			}
			return nil, e
		}
		m.bodyAt = i
		b.one[0] = m
		b.Messages = b.one[:]
		i = end
	case '[':
		b.Batch = true
		if err := s.enter(); err != nil {
			return nil, err.toError("")
		}
		i = s.ws(i + 1)
		if i < len(body) && body[i] == ']' {
			return nil, &Error{Code: CodeInvalidRequest, Message: "invalid request: empty batch"}
		}
		for n := 0; ; n++ {
			if i >= len(body) || body[i] != '{' {
				return nil, &Error{Code: CodeInvalidRequest, Message: fmt.Sprintf("invalid request: batch element %d is not an object", n)}
			}
			m, end, err := s.message(i)
			if err != nil {
				return nil, err.toError(fmt.Sprintf("batch element %d: ", n))
			}
			m.bodyAt = i
			b.Messages = append(b.Messages, m)
			i = s.ws(end)
			if i < len(body) && body[i] == ',' {
				i = s.ws(i + 1)
				continue
			}
			break
		}
		if i >= len(body) || body[i] != ']' {
			return nil, &Error{Code: CodeParseError, Message: "parse error: ',' or ']' expected"}
		}
		i++
	default:
		return nil, &Error{Code: CodeInvalidRequest, Message: "invalid request: body is neither a JSON object nor an array"}
	}
	if s.ws(i) != len(body) {
		return nil, &Error{Code: CodeParseError, Message: "parse error: invalid data after the top-level value"}
	}
	return b, nil
}

// checkJSON checks that body is one valid JSON value with no duplicate
// names, as jsontext sees them.
func checkJSON(body []byte) *Error {
	if err := precheck(body); err != nil {
		return err
	}
	if jsontext.Value(body).IsValid() {
		return nil
	}
	return syntaxError(body)
}

// precheck refuses what no scan needs to read: a body too large for the
// scanner's offsets, an empty one, one that starts with a byte order mark.
func precheck(body []byte) *Error {
	if len(body) > math.MaxUint32 {
		return &Error{Code: CodeInvalidRequest, Message: "invalid request: body larger than 4 GiB"}
	}
	if len(bytes.TrimLeft(body, " \t\r\n")) == 0 {
		return &Error{Code: CodeParseError, Message: "parse error: empty body"}
	}
	if len(body) >= len(bom) && string(body[:len(bom)]) == bom {
		return &Error{Code: CodeParseError, Message: "parse error: body starts with a UTF-8 byte order mark"}
	}
	return nil
}

// syntaxError explains why body is not valid (the slow path).
func syntaxError(body []byte) *Error {
	if !utf8.Valid(body) {
		return &Error{Code: CodeParseError, Message: "parse error: body is not valid UTF-8"}
	}
	d := jsontext.NewDecoder(bytes.NewReader(body))
	_, err := d.ReadValue()
	if err == nil {
		switch _, err = d.ReadToken(); err {
		case nil:
			err = fmt.Errorf("invalid data after the top-level value at offset %d", d.InputOffset())
		case io.EOF:
			err = errors.New("invalid JSON")
		}
	}
	if err == io.ErrUnexpectedEOF {
		err = errors.New("unexpected end of JSON input")
	}
	msg := strings.TrimPrefix(err.Error(), "jsontext: ")
	if len(msg) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	if errors.Is(err, jsontext.ErrDuplicateName) {
		return &Error{Code: CodeInvalidRequest, Message: "invalid request: " + msg}
	}
	return &Error{Code: CodeParseError, Message: "parse error: " + msg}
}
