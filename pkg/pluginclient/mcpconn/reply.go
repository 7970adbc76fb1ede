package mcpconn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// maxErrorText bounds the tool error text quoted in an error.
const maxErrorText = 512

// toolJSON returns the JSON object a cpex tool answered with: the first
// TextContent block holding a JSON object (how Python servers answer), else
// structuredContent. A tool error (isError) is an error wrapping
// cpex.ErrInvalidReply that quotes the tool's text.
func toolJSON(res *mcp.CallToolResult) (json.RawMessage, error) {
	if res == nil {
		return nil, fmt.Errorf("%w: empty tool result", cpex.ErrInvalidReply)
	}
	var texts []string
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			continue
		}
		texts = append(texts, tc.Text)
		if res.IsError {
			continue
		}
		if b := bytes.TrimSpace([]byte(tc.Text)); len(b) > 0 && b[0] == '{' && json.Valid(b) {
			return b, nil
		}
	}
	if res.IsError {
		msg := strings.Join(texts, "; ")
		if len(msg) > maxErrorText {
			msg = msg[:maxErrorText] + "…"
		}
		return nil, fmt.Errorf("%w: tool error: %s", cpex.ErrInvalidReply, msg)
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err == nil && len(b) > 0 && b[0] == '{' {
			return b, nil
		}
	}
	return nil, fmt.Errorf("%w: no JSON object in tool result", cpex.ErrInvalidReply)
}

// parseInvokeReply decodes an invoke_hook result. A reply with neither result
// nor error is cpex.ErrInvalidReply; a reply with error is returned as is.
func parseInvokeReply(res *mcp.CallToolResult) (*cpex.InvokeHookReply, error) {
	raw, err := toolJSON(res)
	if err != nil {
		return nil, err
	}
	var reply cpex.InvokeHookReply
	if err := json.Unmarshal(raw, &reply); err != nil {
		return nil, fmt.Errorf("%w: %v", cpex.ErrInvalidReply, err)
	}
	if reply.Result == nil && reply.Error == nil {
		return nil, fmt.Errorf("%w: neither result nor error", cpex.ErrInvalidReply)
	}
	return &reply, nil
}

// configJSON returns the JSON object of a get_plugin_config result and
// whether the server knows the plugin (cpex answers an unknown name with an
// empty object).
func configJSON(res *mcp.CallToolResult) (json.RawMessage, bool, error) {
	raw, err := toolJSON(res)
	if err != nil {
		return nil, false, err
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, false, fmt.Errorf("%w: %v", cpex.ErrInvalidReply, err)
	}
	return raw, len(probe) > 0, nil
}
