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
// Parse reads a body in one pass, without allocating per value: the scan
// that splits it checks syntax, UTF-8, escapes and duplicate names as
// github.com/go-json-experiment/json/jsontext (the encoding/json/v2
// prototype) does, and the JSON-RPC and MCP rules beside them. jsontext
// reads only invalid input again, to explain it; a fuzz target holds the
// scan to jsontext's verdict.
package mcpmsg

import (
	"bytes"
	"fmt"
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
	// list is the index ParseList made of the result, for a Raw of
	// listLen bytes.
	list    *ListIndex
	listLen int
}

// Body is a parsed HTTP body: one message or a batch.
type Body struct {
	Batch    bool
	Messages []Message
	// Raw is the body as passed to Parse.
	Raw []byte

	one     [1]Message  // backing array of Messages for a single message
	scratch [16]nameRef // Parse's initial name stack, allocated with the Body
	list    ListIndex   // ParseList's index of the first list, allocated with the Body
}

// MayBeResponse is a cheap pre-check, without parsing: false means data
// holds no JSON-RPC response (a response names "id"; a notification such as
// a progress update does not), so there is nothing for a post hook to find.
// Data with a \u escape is always a candidate, since a member name may be
// escaped. A true answer still needs Parse.
func MayBeResponse(data []byte) bool {
	return bytes.Contains(data, []byte(`"id"`)) || bytes.Contains(data, []byte(`\u`))
}
