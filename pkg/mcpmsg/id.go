package mcpmsg

import (
	"bytes"
	"encoding/json"
	"errors"
)

// An id is its JSON value. The sidecar matches a result to its request by
// id (pending answers, the attribution stores, the reused-id check), and a
// server answers with the id as it decoded it: the Go and TypeScript SDKs
// answer 7.0, 7e0 and 70e-1 as 7, 9007199254740993 as 9007199254740992,
// and "\u0061" as "a". If the sidecar compared the bytes as sent, such an
// answer would match no request, or another request with the same value.
//
// MCP wants a request id to be "a string or integer" (base protocol), so
// a numeric request id must be an integer written plainly (no fraction,
// exponent, leading zero, plus sign or minus zero) within ±(2^53−1), the
// range every SDK decodes exactly; anything else is refused at the
// request (Parse), where the client can be told why. A string id is
// compared after unescaping. [CanonicalID] is the one form every
// comparison uses.

// maxSafeInteger is 2^53−1, the largest integer an IEEE double (the
// TypeScript SDK's number) holds exactly, written out.
const maxSafeInteger = "9007199254740991"

// ErrID is the error of [CanonicalID]: the id is neither a plain safe
// integer nor a JSON string.
var ErrID = errors.New(`id must be a string or an integer written plainly, within ±(2^53-1)`)

// CanonicalID returns the form under which a raw JSON-RPC id (as a
// Message holds it) is compared: a plain safe integer or a string without
// escapes as it is (no allocation), any other string decoded and
// re-encoded without escaping HTML, so that ids equal as JSON values have
// one form. Numbers outside that rule and anything else are ErrID.
func CanonicalID(id []byte) ([]byte, error) {
	if len(id) == 0 {
		return nil, ErrID
	}
	if c := id[0]; c == '-' || c >= '0' && c <= '9' {
		if !plainSafeInteger(id) {
			return nil, ErrID
		}
		return id, nil
	}
	if len(id) < 2 || id[0] != '"' || id[len(id)-1] != '"' {
		return nil, ErrID
	}
	inner := id[1 : len(id)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		for _, c := range inner {
			if c < 0x20 || c == '"' {
				return nil, ErrID
			}
		}
		return id, nil
	}
	var s string
	if err := json.Unmarshal(id, &s); err != nil {
		return nil, ErrID
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, ErrID
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// plainSafeInteger reports whether b is -?(0|[1-9][0-9]*), not "-0", of
// magnitude at most 2^53−1.
func plainSafeInteger(b []byte) bool {
	digits := b
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > len(maxSafeInteger) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	if digits[0] == '0' {
		return len(digits) == 1 && len(b) == 1 // "0", never "-0" or "01"
	}
	return len(digits) < len(maxSafeInteger) || string(digits) <= maxSafeInteger
}
