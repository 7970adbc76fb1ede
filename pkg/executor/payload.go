package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// checkPayload reports whether a modified_payload has the shape of the
// hook's payload (plugin-protocol.md §2), so that the processor can map it
// back onto the MCP message. Absent and null optional fields are accepted
// (Python omits nulls).
//
//	tool_pre_invoke      name: non-empty string; args: object; headers: {str: str}
//	tool_post_invoke     name: string; result: object (a CallToolResult)
//	prompt_pre_fetch     prompt_id: non-empty string; args: {str: str}
//	prompt_post_fetch    prompt_id: string; result: object (a GetPromptResult)
//	resource_pre_fetch   uri: non-empty string; metadata: object
//	resource_post_fetch  uri: string; content: present, not null
//	other hooks          an object
func checkPayload(hook cpex.HookType, p json.RawMessage) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(p, &obj); err != nil || obj == nil {
		return fmt.Errorf("%w: %s payload is not a JSON object", ErrInvalidPayload, hook)
	}
	c := shapeChecker{hook: hook, obj: obj}
	switch hook {
	case cpex.ToolPreInvoke:
		c.str("name", true)
		c.object("args", false)
		c.stringMap("headers")
	case cpex.ToolPostInvoke:
		c.str("name", false)
		c.object("result", true)
	case cpex.PromptPreFetch:
		c.str("prompt_id", true)
		c.stringMap("args")
	case cpex.PromptPostFetch:
		c.str("prompt_id", false)
		c.object("result", true)
	case cpex.ResourcePreFetch:
		c.str("uri", true)
		c.object("metadata", false)
	case cpex.ResourcePostFetch:
		c.str("uri", false)
		if v, ok := obj["content"]; !ok || isNull(v) {
			c.fail("content is missing")
		}
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

// object requires an object field, or allows it absent/null when optional.
func (c *shapeChecker) object(key string, required bool) {
	v, ok := c.obj[key]
	if !ok || isNull(v) {
		if required {
			c.fail("%s must be an object", key)
		}
		return
	}
	if !isObject(v) {
		c.fail("%s must be an object", key)
	}
}

// stringMap allows an absent/null field, else requires {str: str}.
func (c *shapeChecker) stringMap(key string) {
	v, ok := c.obj[key]
	if !ok || isNull(v) {
		return
	}
	var m map[string]string
	if !isObject(v) || json.Unmarshal(v, &m) != nil {
		c.fail("%s must be an object of strings", key)
	}
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
