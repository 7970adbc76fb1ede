// Package mcpmsg validates MCP JSON-RPC bodies strictly and splits them into
// messages without decoding them: every field it returns is a sub-slice of
// the body.
//
// Strictness is a security property here: a guard that reads a body
// differently from the server behind it protects nothing. So Parse refuses
// everything that servers may read in more than one way: invalid JSON or
// UTF-8, a byte order mark, trailing data, duplicate member names at any
// depth (also names that differ only in case, which Go's encoding/json v1
// and .NET match case-insensitively), nesting deeper than [MaxDepth], and
// malformed envelopes or params of the hooked methods.
//
// Syntax, UTF-8 and exact duplicate names are checked by
// github.com/go-json-experiment/json/jsontext (the encoding/json/v2
// prototype); this package adds the JSON-RPC and MCP rules in one more pass
// without allocating per value.
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

// JSON-RPC error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// Methods whose params Parse checks (the hooked requests).
const (
	MethodToolsCall     = "tools/call"
	MethodPromptsGet    = "prompts/get"
	MethodResourcesRead = "resources/read"
)

// Error is a JSON-RPC error: a code and a reason a client can read. Parse and
// the param views return only *Error.
type Error struct {
	Code    int
	Message string
	// ID is the raw id of the request the error is about, when the body is
	// a single request whose id could be read (e.g. invalid params), so the
	// error response can carry it; nil otherwise.
	ID []byte
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

func codeText(code int) string {
	switch code {
	case CodeParseError:
		return "parse error"
	case CodeInvalidRequest:
		return "invalid request"
	case CodeMethodNotFound:
		return "method not found"
	case CodeInvalidParams:
		return "invalid params"
	default:
		return "internal error"
	}
}

// Kind is the kind of a JSON-RPC message.
type Kind int

// Kinds of messages. The zero Kind is not a valid message kind.
const (
	KindRequest      Kind = iota + 1 // method and id
	KindNotification                 // method, no id
	KindResponse                     // result
	KindError                        // error
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	case KindError:
		return "error"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Message is one JSON-RPC message of a body. Its byte slices alias the body
// passed to Parse: they are valid as long as the body is and must not be
// modified.
type Message struct {
	Raw    []byte // the exact bytes of this message (a sub-slice of the body; no copy)
	Kind   Kind
	ID     []byte // raw JSON of the id (e.g. `7` or `"abc"`), nil for notifications (and id-less errors)
	Method string // unescaped
	Params []byte // raw JSON of params, nil if absent
	Result []byte // raw JSON of result (responses)
	Error  []byte // raw JSON of error (error responses)

	// Set by Parse for the hooked requests:
	// tools/call and prompts/get: Name is params.name (unescaped) and
	// Arguments the raw params.arguments (nil if absent);
	// resources/read: URI is params.uri (unescaped).
	Name      string
	Arguments []byte
	URI       string

	// Offsets in Raw of the params and result values, for the rewriters;
	// -1 when absent. Trusted only while they still match the slices above.
	paramsAt, resultAt int
	// Offset of Raw in the body, for Join.
	bodyAt int
}

// Body is a parsed HTTP body: one message or a batch.
type Body struct {
	Batch    bool
	Messages []Message
	// Raw is the body as passed to Parse.
	Raw []byte

	one     [1]Message  // backing array of Messages for a single message
	scratch [16]nameRef // Parse's initial name stack, allocated with the Body
}

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
// only in an error response); "method" a string, compared exactly after
// unescaping; "params" an object or an array; a message has either a method
// or exactly one of "result" and "error" (an object). A result needs an id;
// an error may lack one (ID nil), as the TypeScript SDK sends it. Other
// members are kept and ignored.
//
// Hooked methods: tools/call and prompts/get need params.name (string) and
// an optional params.arguments (object; for prompts/get its values must be
// strings); resources/read needs params.uri (string). They must carry an id.
func Parse(body []byte) (*Body, error) {
	if err := checkJSON(body); err != nil {
		return nil, err
	}
	b := &Body{Raw: body}
	s := scanner{b: body, names: b.scratch[:0]}
	i := s.ws(0)
	switch body[i] {
	case '{':
		m, _, err := s.message(i)
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
	default:
		return nil, &Error{Code: CodeInvalidRequest, Message: "invalid request: body is neither a JSON object nor an array"}
	}
	return b, nil
}

// checkJSON checks that body is one valid JSON value with no duplicate
// names, as jsontext sees them.
func checkJSON(body []byte) *Error {
	if len(body) > math.MaxUint32 {
		return &Error{Code: CodeInvalidRequest, Message: "invalid request: body larger than 4 GiB"}
	}
	if len(bytes.TrimLeft(body, " \t\r\n")) == 0 {
		return &Error{Code: CodeParseError, Message: "parse error: empty body"}
	}
	if len(body) >= len(bom) && string(body[:len(bom)]) == bom {
		return &Error{Code: CodeParseError, Message: "parse error: body starts with a UTF-8 byte order mark"}
	}
	if jsontext.Value(body).IsValid() {
		return nil
	}
	return syntaxError(body)
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

func invalid(reason string) *errScan { return &errScan{CodeInvalidRequest, reason} }

// message parses the message object at i and returns it and its end.
func (s *scanner) message(i int) (Message, int, *errScan) {
	m := Message{paramsAt: -1, resultAt: -1}
	it, err := s.object(i)
	if err != nil {
		return m, 0, err
	}
	var hasRPC, hasID, hasMethod bool
	for {
		mem, ok, err := it.next()
		if err != nil {
			return m, 0, err
		}
		if !ok {
			break
		}
		v := s.b[mem.vStart:mem.vEnd]
		switch string(mem.name) {
		case "jsonrpc":
			if v[0] != '"' {
				return m, 0, invalid(`"jsonrpc" must be "2.0"`)
			}
			u, _, err := s.unquote(mem.vStart, mem.vEnd)
			if err != nil || string(u) != "2.0" {
				return m, 0, invalid(`"jsonrpc" must be "2.0"`)
			}
			hasRPC = true
		case "id":
			switch c := v[0]; {
			case c == '"' || c == '-' || (c >= '0' && c <= '9') || c == 'n':
				m.ID = v
				hasID = true
			default:
				return m, 0, invalid(`"id" must be a string or a number`)
			}
		case "method":
			if v[0] != '"' {
				return m, 0, invalid(`"method" must be a string`)
			}
			u, _, err := s.unquote(mem.vStart, mem.vEnd)
			if err != nil {
				return m, 0, err
			}
			if hasControl(u) {
				return m, 0, invalid(`"method" must not contain control characters`)
			}
			m.Method = internMethod(u)
			hasMethod = true
		case "params":
			if v[0] != '{' && v[0] != '[' {
				return m, 0, invalid(`"params" must be an object or an array`)
			}
			m.Params = v
			m.paramsAt = mem.vStart - i
		case "result":
			m.Result = v
			m.resultAt = mem.vStart - i
		case "error":
			if v[0] != '{' {
				return m, 0, invalid(`"error" must be an object`)
			}
			m.Error = v
		default:
			if k := caseVariant(mem.name, "jsonrpc", "id", "method", "params", "result", "error"); k != "" {
				return m, 0, invalid("member " + quoteShort(mem.name) + ` differs from "` + k + `" only in case`)
			}
		}
	}
	end := it.end
	m.Raw = s.b[i:end:end]
	if !hasRPC {
		return m, 0, invalid(`"jsonrpc" must be "2.0"`)
	}
	null := hasID && m.ID[0] == 'n'
	switch {
	case hasMethod:
		if m.Result != nil || m.Error != nil {
			return m, 0, invalid(`a message with a "method" cannot have a "result" or an "error"`)
		}
		if !hasID {
			m.Kind = KindNotification
			break
		}
		if null {
			return m, 0, invalid(`a request "id" must be a string or a number, not null`)
		}
		m.Kind = KindRequest
	case m.Result != nil && m.Error != nil:
		return m, 0, invalid(`a response cannot have both "result" and "error"`)
	case m.Result != nil:
		if !hasID || null {
			return m, 0, invalid(`a response needs an "id" (a string or a number)`)
		}
		m.Kind = KindResponse
	case m.Error != nil:
		// JSON-RPC wants "id" (null when unknown), but the TypeScript SDK
		// omits it in its transport errors; an error carries nothing to
		// inspect, so both are accepted.
		m.Kind = KindError
	default:
		return m, 0, invalid(`a message needs a "method", a "result" or an "error"`)
	}
	switch m.Method {
	case MethodToolsCall, MethodPromptsGet, MethodResourcesRead:
		if m.Kind != KindRequest {
			return m, 0, invalid(m.Method + " must be a request with an id")
		}
		if err := s.hooked(&m, i); err != nil {
			return m, 0, err
		}
	}
	return m, end, nil
}

// hooked checks the params of a hooked request and fills m's views.
func (s *scanner) hooked(m *Message, at int) *errScan {
	if m.Params == nil {
		return &errScan{CodeInvalidParams, m.Method + `: "params" missing`}
	}
	// The params were fully checked during the message walk: only their top
	// level is walked again.
	skip := s.skip
	s.skip = true
	defer func() { s.skip = skip }()
	pos := at + m.paramsAt
	switch m.Method {
	case MethodToolsCall, MethodPromptsGet:
		name, args, err := s.namedArgs(pos, m.Method)
		if err != nil {
			return err
		}
		m.Name, m.Arguments = name, args
	case MethodResourcesRead:
		uri, err := s.resourceRead(pos)
		if err != nil {
			return err
		}
		m.URI = uri
	}
	return nil
}

// caseVariant returns the name in known that name equals only when case is
// ignored, or "". Servers that match names case-insensitively (Go's
// encoding/json v1, .NET web defaults) would read such a member as the known
// one, which this package would not see.
func caseVariant(name []byte, known ...string) string {
	for _, k := range known {
		if string(name) != k && foldEqual(name, []byte(k)) {
			return k
		}
	}
	return ""
}

// hasControl reports whether b holds a control character (a NUL would end
// the method name for a C string).
func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// internMethod returns b as a string, without allocating for the common MCP
// methods.
func internMethod(b []byte) string {
	switch string(b) {
	case MethodToolsCall:
		return MethodToolsCall
	case MethodPromptsGet:
		return MethodPromptsGet
	case MethodResourcesRead:
		return MethodResourcesRead
	case "initialize":
		return "initialize"
	case "ping":
		return "ping"
	case "tools/list":
		return "tools/list"
	case "prompts/list":
		return "prompts/list"
	case "resources/list":
		return "resources/list"
	case "resources/templates/list":
		return "resources/templates/list"
	case "resources/subscribe":
		return "resources/subscribe"
	case "resources/unsubscribe":
		return "resources/unsubscribe"
	case "completion/complete":
		return "completion/complete"
	case "logging/setLevel":
		return "logging/setLevel"
	case "sampling/createMessage":
		return "sampling/createMessage"
	case "elicitation/create":
		return "elicitation/create"
	case "roots/list":
		return "roots/list"
	case "notifications/initialized":
		return "notifications/initialized"
	case "notifications/progress":
		return "notifications/progress"
	case "notifications/cancelled":
		return "notifications/cancelled"
	case "notifications/message":
		return "notifications/message"
	case "notifications/resources/updated":
		return "notifications/resources/updated"
	case "notifications/resources/list_changed":
		return "notifications/resources/list_changed"
	case "notifications/tools/list_changed":
		return "notifications/tools/list_changed"
	case "notifications/prompts/list_changed":
		return "notifications/prompts/list_changed"
	case "notifications/roots/list_changed":
		return "notifications/roots/list_changed"
	}
	return string(b)
}

// MayBeResponse is a cheap pre-check, without parsing: false means data
// holds no JSON-RPC response (a response names "id"; a notification such as
// a progress update does not), so there is nothing for a post hook to find.
// Data with a \u escape is always a candidate, since a member name may be
// escaped. A true answer still needs Parse.
func MayBeResponse(data []byte) bool {
	return bytes.Contains(data, []byte(`"id"`)) || bytes.Contains(data, []byte(`\u`))
}
