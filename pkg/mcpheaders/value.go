// Package mcpheaders handles the standard HTTP headers of MCP 2026-07-28
// (Streamable HTTP): Mcp-Method, Mcp-Name and the Mcp-Param-<H> headers that
// mirror tool arguments annotated with "x-mcp-header": "<H>" in the tool's
// input schema.
//
// It knows no HTTP library and no Envoy: headers are [Header] pairs as the
// caller holds them, names compared case-insensitively. It offers the value
// encoding ([EncodeValue], [Decode]), the version test
// ([StandardHeaders]), the check of Mcp-Method/Mcp-Name against a body
// ([Check], a [*MismatchError] the caller answers with HTTP 400 and JSON-RPC
// [CodeHeaderMismatch]), and the header mutations that keep the mirrors true
// after a request was rewritten ([Mirror]).
//
// Value encoding (the spec's rule, as the Go SDK v1.8.0 applies it): a
// string of visible ASCII and spaces (0x20–0x7E) without leading or trailing
// space or tab is sent as is; any other string, and any string that itself
// looks like the sentinel, is sent as "=?base64?" + standard Base64 (with
// padding) of its UTF-8 bytes + "?=". Only primitive arguments are mirrored:
// strings, booleans ("true"/"false") and integers within ±(2^53−1), in
// decimal; the Go SDK does not mirror other numbers, nulls, arrays or
// objects. A receiver compares integers numerically ("42.0" matches 42).
package mcpheaders

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Header names and the version that introduced them.
const (
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
	ParamPrefix           = "Mcp-Param-"
	// StandardHeadersVersion is the first protocol version with these headers.
	StandardHeadersVersion = "2026-07-28"
	// CodeHeaderMismatch is the JSON-RPC error code for a request whose
	// headers disagree with its body (answered with HTTP 400).
	CodeHeaderMismatch = -32020
)

const (
	sentinelPrefix = "=?base64?"
	sentinelSuffix = "?="
	maxSafeInteger = 1<<53 - 1
)

// Errors of the value codec. Use errors.Is.
var (
	// ErrBadEncoding: a sentinel-wrapped value whose payload is not valid
	// Base64 or not UTF-8.
	ErrBadEncoding = errors.New("mcpheaders: invalid =?base64?…?= value")
)

// EncodeValue returns s as a header value: as is when it is plain visible
// ASCII, else wrapped in the Base64 sentinel.
func EncodeValue(s string) string {
	if !needsBase64(s) {
		return s
	}
	return sentinelPrefix + base64.StdEncoding.EncodeToString([]byte(s)) + sentinelSuffix
}

func needsBase64(s string) bool {
	if s == "" {
		return false
	}
	if first, last := s[0], s[len(s)-1]; first == ' ' || first == '\t' || last == ' ' || last == '\t' {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return true
		}
	}
	return isSentinel(s)
}

func isSentinel(v string) bool {
	rest, ok := strings.CutPrefix(v, sentinelPrefix)
	return ok && strings.HasSuffix(rest, sentinelSuffix)
}

// Decode returns the value a header carries: the decoded payload of a
// sentinel-wrapped value, any other value as is.
func Decode(v string) (string, error) {
	rest, ok := strings.CutPrefix(v, sentinelPrefix)
	if !ok {
		return v, nil
	}
	payload, ok := strings.CutSuffix(rest, sentinelSuffix)
	if !ok {
		return v, nil
	}
	if strings.ContainsAny(payload, "\r\n") { // the decoder would skip them
		return "", fmt.Errorf("%w: line break in payload", ErrBadEncoding)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(payload)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadEncoding, err)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("%w: payload is not UTF-8", ErrBadEncoding)
	}
	return string(b), nil
}

// kind of a JSON value as far as mirroring goes.
type kind int

const (
	kAbsent kind = iota // missing or null: no header
	kPrimitive
	kOther // number that is not a safe integer, array, object, invalid
)

// primitive returns the canonical text of a raw JSON argument value.
func primitive(raw jsontext.Value) (string, kind) {
	if len(raw) == 0 {
		return "", kAbsent
	}
	switch raw.Kind() {
	case 'n':
		return "", kAbsent
	case 't':
		return "true", kPrimitive
	case 'f':
		return "false", kPrimitive
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", kOther
		}
		return s, kPrimitive
	case '0':
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || f != math.Trunc(f) || math.Abs(f) > maxSafeInteger {
			return "", kOther
		}
		return strconv.FormatInt(int64(f), 10), kPrimitive
	}
	return "", kOther
}

// sameValue reports whether a decoded header value carries the primitive
// canonical text want: exactly for strings and booleans, numerically for
// integers.
func sameValue(decoded, want string, raw jsontext.Value) bool {
	if raw.Kind() != '0' {
		return decoded == want
	}
	f, err := strconv.ParseFloat(decoded, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > maxSafeInteger {
		return false
	}
	return strconv.FormatInt(int64(f), 10) == want
}

// StandardHeaders reports whether a request declaring MCP-Protocol-Version
// version uses the standard headers (version ≥ 2026-07-28). A value that is
// not a YYYY-MM-DD date declares nothing.
func StandardHeaders(version string) bool {
	return declaresAtLeast(version, StandardHeadersVersion)
}

// declaresAtLeast reports whether protocol version v is min or later. Both
// must be YYYY-MM-DD dates; anything else is false.
func declaresAtLeast(v, min string) bool {
	return isDate(v) && isDate(min) && v >= min
}

func isDate(v string) bool {
	if len(v) != 10 || v[4] != '-' || v[7] != '-' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if i != 4 && i != 7 && (v[i] < '0' || v[i] > '9') {
			return false
		}
	}
	return true
}
