package mcpheaders

import (
	"fmt"
	"strings"
)

// Header is one HTTP request header. Names compare case-insensitively.
type Header struct {
	Name, Value string
}

// values returns the values of header name in h.
func values(h []Header, name string) []string {
	var out []string
	for _, x := range h {
		if strings.EqualFold(x.Name, name) {
			out = append(out, x.Value)
		}
	}
	return out
}

// Value returns the first value of header name in h, and whether it is
// present.
func Value(h []Header, name string) (string, bool) {
	for _, x := range h {
		if strings.EqualFold(x.Name, name) {
			return x.Value, true
		}
	}
	return "", false
}

// MismatchError is a request whose standard headers disagree with its body,
// or lack one the protocol version requires. The caller answers HTTP 400
// with a JSON-RPC error of code CodeHeaderMismatch and Error() as message.
type MismatchError struct {
	Header      string // Mcp-Method or Mcp-Name
	HeaderValue string // as received; empty when missing
	BodyValue   string
	Missing     bool
}

func (e *MismatchError) Error() string {
	if e.Missing {
		return fmt.Sprintf("header mismatch: missing required %s header (body has %q)", e.Header, e.BodyValue)
	}
	return fmt.Sprintf("header mismatch: %s header value %q does not match body value %q", e.Header, e.HeaderValue, e.BodyValue)
}

// named lists the methods whose target Mcp-Name mirrors (params.name, or
// params.uri for resources/read).
var named = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// Check compares the request headers h with the body's method and name
// (params.name of tools/call and prompts/get, params.uri of resources/read;
// ignored for other methods). A header that is present must agree with the
// body whatever the protocol version (something in front may have routed on
// it); a missing one is refused only when the request declares
// MCP-Protocol-Version ≥ 2026-07-28. Several values of one header must all
// agree. Mcp-Name may be sent as is or Base64-wrapped. It returns nil or a
// *MismatchError.
func Check(h []Header, method, name string) error {
	v, _ := Value(h, HeaderProtocolVersion)
	required := StandardHeaders(v)
	if err := checkOne(h, HeaderMethod, method, required, false); err != nil {
		return err
	}
	if !named[method] {
		return nil
	}
	return checkOne(h, HeaderName, name, required, true)
}

func checkOne(h []Header, header, body string, required, encoded bool) error {
	vals := values(h, header)
	if len(vals) == 0 {
		if required {
			return &MismatchError{Header: header, BodyValue: body, Missing: true}
		}
		return nil
	}
	for _, v := range vals {
		if v == body {
			continue
		}
		if encoded && isSentinel(v) {
			if d, err := Decode(v); err == nil && d == body {
				continue
			}
		}
		return &MismatchError{Header: header, HeaderValue: v, BodyValue: body}
	}
	return nil
}
