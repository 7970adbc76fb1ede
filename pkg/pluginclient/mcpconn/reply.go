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

// toolResult is what a cpex tool answers: the parts of a CallToolResult
// that carry a plugin's reply.
type toolResult struct {
	Content           []toolContent   `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

// toolContent is one content block; only text blocks carry a reply.
type toolContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// sdkResult is res, a result the go-sdk decoded, as a toolResult. A
// structuredContent that does not encode is left out (toolJSON then finds
// no object).
func sdkResult(res *mcp.CallToolResult) *toolResult {
	if res == nil {
		return nil
	}
	out := &toolResult{IsError: res.IsError}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out.Content = append(out.Content, toolContent{Type: "text", Text: tc.Text})
		}
	}
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			out.StructuredContent = b
		}
	}
	return out
}

// toolJSON returns the JSON object a cpex tool answered with: the first
// text block holding a JSON object (how Python servers answer), else
// structuredContent. A tool error (isError) is an error wrapping
// cpex.ErrInvalidReply that quotes the tool's text.
func toolJSON(res *toolResult) (json.RawMessage, error) {
	if res == nil {
		return nil, fmt.Errorf("%w: empty tool result", cpex.ErrInvalidReply)
	}
	var texts []string
	for _, c := range res.Content {
		if c.Type != "text" {
			continue
		}
		texts = append(texts, c.Text)
		if res.IsError {
			continue
		}
		if b := bytes.TrimSpace([]byte(c.Text)); len(b) > 0 && b[0] == '{' && json.Valid(b) {
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
	if b := bytes.TrimSpace(res.StructuredContent); len(b) > 0 && b[0] == '{' {
		return b, nil
	}
	return nil, fmt.Errorf("%w: no JSON object in tool result", cpex.ErrInvalidReply)
}

// parseInvokeReply decodes an invoke_hook result. A reply with neither result
// nor error is cpex.ErrInvalidReply; a reply with error is returned as is.
func parseInvokeReply(res *toolResult) (*cpex.InvokeHookReply, error) {
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
func configJSON(res *toolResult) (json.RawMessage, bool, error) {
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
