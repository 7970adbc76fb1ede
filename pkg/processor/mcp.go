package processor

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// preHook maps an MCP method to its pre hook and post hook.
func preHook(method string) (pre, post cpex.HookType, ok bool) {
	switch method {
	case "tools/call":
		return cpex.ToolPreInvoke, cpex.ToolPostInvoke, true
	case "prompts/get":
		return cpex.PromptPreFetch, cpex.PromptPostFetch, true
	case "resources/read":
		return cpex.ResourcePreFetch, cpex.ResourcePostFetch, true
	}
	return "", "", false
}

// call is the hooked part of a request's params.
type call struct {
	target string // tool name, prompt name or resource uri
	args   []byte // arguments (tools, prompts); nil if absent
}

// callOf returns the hooked part of a request that mcpmsg.Parse validated.
func callOf(hook cpex.HookType, m *mcpmsg.Message) call {
	if hook == cpex.ResourcePreFetch {
		return call{target: m.URI}
	}
	return call{target: m.Name, args: m.Arguments}
}

// payload encodes the pre hook payload. The arguments are embedded as the
// raw bytes the client sent (mcpmsg.Parse validated them): no decode, no
// re-encode.
func (c call) payload(hook cpex.HookType, headers map[string]string) (json.RawMessage, error) {
	args := c.args
	if len(args) == 0 {
		args = []byte("{}")
	}
	switch hook {
	case cpex.ToolPreInvoke:
		var h []byte
		if len(headers) > 0 {
			var err error
			if h, err = json.Marshal(headers); err != nil {
				return nil, fmt.Errorf("encode %s headers: %w", hook, err)
			}
		}
		return rawObject("name", c.target, "args", args, "headers", h)
	case cpex.PromptPreFetch:
		return rawObject("prompt_id", c.target, "args", args, "", nil)
	default:
		return rawObject("uri", c.target, "metadata", []byte("{}"), "", nil)
	}
}

// rawObject encodes {"<key>":"<value>","<rawKey>":<raw>[,"<optKey>":<opt>]}
// around raw JSON that was validated already; opt is left out when empty.
func rawObject(key, value, rawKey string, raw []byte, optKey string, opt []byte) (json.RawMessage, error) {
	b := make([]byte, 0, len(value)+len(raw)+len(opt)+len(key)+len(rawKey)+len(optKey)+16)
	b = append(b, `{"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	b, err := jsontext.AppendQuote(b, value)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", key, err)
	}
	b = append(b, `,"`...)
	b = append(b, rawKey...)
	b = append(b, `":`...)
	b = append(b, raw...)
	if len(opt) > 0 {
		b = append(b, `,"`...)
		b = append(b, optKey...)
		b = append(b, `":`...)
		b = append(b, opt...)
	}
	return append(b, '}'), nil
}

func (c call) executorTarget(hook cpex.HookType) executor.Target {
	return targetFor(hook, c.target)
}

func targetFor(hook cpex.HookType, name string) executor.Target {
	switch hook {
	case cpex.ToolPreInvoke, cpex.ToolPostInvoke:
		return executor.Target{Tool: name}
	case cpex.PromptPreFetch, cpex.PromptPostFetch:
		return executor.Target{Prompt: name}
	default:
		return executor.Target{Resource: name}
	}
}

// forbiddenHeader lists headers a plugin may not set on the upstream request.
func forbiddenHeader(k string) bool {
	return strings.HasPrefix(k, ":") || strings.HasPrefix(k, "x-envoy-") ||
		k == "host" || k == "content-length" || k == "transfer-encoding"
}

// rewriteRequest applies a modified pre hook payload to the message: the new
// name/arguments/uri go into params, every other key is kept. Headers a tool
// plugin added or changed are returned to be set on the upstream request.
func rewriteRequest(m mcpmsg.Message, hook cpex.HookType, payload json.RawMessage, sent map[string]string) ([]byte, map[string]string, error) {
	set := map[string][]byte{}
	var headers map[string]string
	switch hook {
	case cpex.ToolPreInvoke:
		var p cpex.ToolPreInvokePayload
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, nil, fmt.Errorf("tool_pre_invoke payload: %w", err)
		}
		name, _ := json.Marshal(p.Name)
		set["name"] = name
		if len(p.Args) > 0 {
			set["arguments"] = p.Args
		}
		for k, v := range p.Headers {
			k = strings.ToLower(k)
			if sent[k] == v || forbiddenHeader(k) {
				continue
			}
			if headers == nil {
				headers = make(map[string]string)
			}
			headers[k] = v
		}
	case cpex.PromptPreFetch:
		var p cpex.PromptPreFetchPayload
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, nil, fmt.Errorf("prompt_pre_fetch payload: %w", err)
		}
		name, _ := json.Marshal(p.PromptID)
		set["name"] = name
		if len(p.Args) > 0 {
			set["arguments"] = p.Args
		}
	case cpex.ResourcePreFetch:
		var p cpex.ResourcePreFetchPayload
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, nil, fmt.Errorf("resource_pre_fetch payload: %w", err)
		}
		uri, _ := json.Marshal(p.URI)
		set["uri"] = uri
	}
	msg, err := mcpmsg.ReplaceParams(m, set)
	if err != nil {
		return nil, nil, err
	}
	return msg, headers, nil
}

// postPayload encodes the post hook payload around the raw result.
func postPayload(hook cpex.HookType, target string, result []byte) (json.RawMessage, error) {
	switch hook {
	case cpex.ToolPostInvoke:
		return rawObject("name", target, "result", result, "", nil)
	case cpex.PromptPostFetch:
		return rawObject("prompt_id", target, "result", result, "", nil)
	default:
		return rawObject("uri", target, "content", result, "", nil)
	}
}

// resultOf extracts the new JSON-RPC result from a modified post payload.
func resultOf(hook cpex.HookType, payload json.RawMessage) ([]byte, error) {
	var res json.RawMessage
	switch hook {
	case cpex.ToolPostInvoke:
		var p cpex.ToolPostInvokePayload
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, err
		}
		res = p.Result
	case cpex.PromptPostFetch:
		var p cpex.PromptPostFetchPayload
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, err
		}
		res = p.Result
	default:
		var p cpex.ResourcePostFetchPayload
		if err := json.Unmarshal(payload, &p); err != nil {
			return nil, err
		}
		res = p.Content
	}
	if len(res) == 0 || res[0] != '{' {
		return nil, errors.New("result is not a JSON object")
	}
	return res, nil
}

// refusal is one message the sidecar answers itself instead of forwarding.
type refusal struct {
	index   int
	id      []byte
	code    int
	message string
	data    map[string]any
	status  int
	headers map[string]string
	reason  string // metrics label
	denied  bool   // caused by a plugin
}

func (r refusal) errorResponse() []byte {
	var data any
	if r.data != nil {
		data = r.data
	}
	return mcpmsg.ErrorResponse(r.id, r.code, r.message, data)
}

// refusalOf turns a blocking outcome into a refusal.
func (st *stream) refusalOf(out executor.Outcome, index int, id []byte, hook cpex.HookType) (refusal, bool) {
	switch {
	case out.Violation != nil:
		v := out.Violation
		r := refusal{index: index, id: id, code: -32000, status: http.StatusOK, reason: "blocked", denied: true,
			message: v.Reason + ": " + v.Description,
			data:    map[string]any{"plugin": v.PluginName, "code": v.Code, "details": v.Details},
			headers: v.HTTPHeaders,
		}
		if v.MCPErrorCode != nil {
			r.code = *v.MCPErrorCode
		}
		if v.HTTPStatusCode != nil && *v.HTTPStatusCode >= 200 && *v.HTTPStatusCode <= 599 {
			r.status = *v.HTTPStatusCode
		}
		st.logger().Info().Str("hook", string(hook)).Str("plugin", v.PluginName).Str("code", v.Code).Str("reason", v.Reason).Msg("blocked by plugin")
		return r, true
	case out.Err != nil:
		e := out.Err
		// The executor logged the failure (warn, with on_error and duration).
		st.logger().Debug().Str("hook", string(hook)).Str("plugin", e.Plugin).Err(e.Cause).Bool("plugin_down", e.Down).Msg("refused: plugin failed (on_error: fail)")
		return refusal{index: index, id: id, code: mcpmsg.CodeInternalError, status: http.StatusOK, reason: "plugin_error", denied: true,
			message: fmt.Sprintf("plugin %s failed: %v", e.Plugin, e.Cause),
			data:    map[string]any{"plugin": e.Plugin},
		}, true
	}
	return refusal{}, false
}

// refuse answers the request with the refusals. A single message gets its
// error. In a batch, nothing is forwarded: the refused elements get their
// errors and every other request of the batch gets an error saying it was
// not executed because another element was refused — the batch is all or
// nothing, so the client never sees a partial execution it did not ask for.
func (st *stream) refuse(msgs *mcpmsg.Body, refusals []refusal) *extprocv3.ProcessingResponse {
	first := refusals[0]
	st.obs.Immediate(first.reason)
	if !msgs.Batch {
		if first.id == nil {
			// A notification cannot carry a JSON-RPC error (contract §6).
			return jsonRPCReply(http.StatusForbidden, first.errorResponse(), first.denied, first.headers)
		}
		return jsonRPCReply(first.status, first.errorResponse(), first.denied, first.headers)
	}
	byIndex := make(map[int]refusal, len(refusals))
	for _, r := range refusals {
		byIndex[r.index] = r
	}
	var elems [][]byte
	for i, m := range msgs.Messages {
		if r, ok := byIndex[i]; ok {
			if r.id != nil {
				elems = append(elems, r.errorResponse())
			}
			continue
		}
		if m.Kind == mcpmsg.KindRequest {
			elems = append(elems, mcpmsg.ErrorResponse(m.ID, -32000,
				"not executed: another request in this batch was refused", map[string]any{"refused_id": json.RawMessage(refusalID(first))}))
		}
	}
	if len(elems) == 0 {
		return jsonRPCReply(http.StatusForbidden, first.errorResponse(), first.denied, first.headers)
	}
	return jsonRPCReply(http.StatusOK, joinArray(elems), first.denied, nil)
}

func refusalID(r refusal) []byte {
	if r.id == nil {
		return []byte("null")
	}
	return r.id
}
