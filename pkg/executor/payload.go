package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
)

// checkPayload reports whether a modified_payload has the shape of the
// hook's payload (docs/plugin-protocol.md §2), so that the processor can map
// it back onto the MCP message. The keys and shapes come from the hook's
// family (hookfamily.Family). Absent and null optional fields are accepted
// (Python omits nulls).
//
//	pre hook   <TargetKey>: non-empty string; <ArgsKey>: ArgsShape or absent;
//	           <HeadersKey> (tools): {str: str} or absent
//	post hook  <TargetKey>: string; <ResultKey>: ResultShape, required
//	other      an object
func checkPayload(hook cpex.HookType, p json.RawMessage) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(p, &obj); err != nil || obj == nil {
		return fmt.Errorf("%w: %s payload is not a JSON object", ErrInvalidPayload, hook)
	}
	c := shapeChecker{hook: hook, obj: obj}
	f, ok := hookfamily.ByHook(hook)
	switch {
	case !ok:
	case hook == f.Pre:
		c.str(f.TargetKey, true)
		c.shape(f.ArgsKey, f.ArgsShape, false)
		if f.HeadersKey != "" {
			c.shape(f.HeadersKey, hookfamily.ShapeStringMap, false)
		}
	default:
		c.str(f.TargetKey, false)
		c.shape(f.ResultKey, f.ResultShape, true)
	}
	return c.err
}

type shapeChecker struct {
	hook cpex.HookType
	obj  map[string]json.RawMessage
	err  error
}

func (c *shapeChecker) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s: %s", ErrInvalidPayload, c.hook, fmt.Sprintf(format, args...))
	}
}

// str requires a string field (non-empty when nonEmpty).
func (c *shapeChecker) str(key string, nonEmpty bool) {
	v, ok := c.obj[key]
	var s string
	if !ok || json.Unmarshal(v, &s) != nil || isNull(v) {
		c.fail("%s must be a string", key)
		return
	}
	if nonEmpty && s == "" {
		c.fail("%s must not be empty", key)
	}
}

// shape requires key to have the shape s; absent or null is allowed unless
// required.
func (c *shapeChecker) shape(key string, s hookfamily.Shape, required bool) {
	v, ok := c.obj[key]
	if !ok || isNull(v) {
		if required {
			c.fail("%s %s", key, shapeText[s])
		}
		return
	}
	switch s {
	case hookfamily.ShapeObject:
		if !isObject(v) {
			c.fail("%s %s", key, shapeText[s])
		}
	case hookfamily.ShapeStringMap:
		var m map[string]string
		if !isObject(v) || json.Unmarshal(v, &m) != nil {
			c.fail("%s %s", key, shapeText[s])
		}
	}
}

var shapeText = [...]string{
	hookfamily.ShapeObject:    "must be an object",
	hookfamily.ShapeStringMap: "must be an object of strings",
	hookfamily.ShapePresent:   "is missing",
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

func isObject(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '{'
}

// jsonEqual reports whether two JSON texts hold the same value. Numbers are
// compared by their text, so "1" and "1.0" differ: a false "different" only
// costs a re-encoding, a false "equal" would lose a modification.
func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	va, err := decodeNumbers(a)
	if err != nil {
		return false
	}
	vb, err := decodeNumbers(b)
	if err != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

func decodeNumbers(p json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(p))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}
