package cpexpb

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// NewInvokeHookRequest builds the InvokeHook request of one hook call.
func NewInvokeHookRequest(hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext) (*InvokeHookRequest, error) {
	p, err := StructFromJSON(payload)
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	c, err := ContextToPB(pctx)
	if err != nil {
		return nil, err
	}
	return &InvokeHookRequest{HookType: string(hook), PluginName: plugin, Payload: p, Context: c}, nil
}

// ArgsFromPB turns an InvokeHook request into the arguments of the
// invoke_hook tool.
func ArgsFromPB(r *InvokeHookRequest) (cpex.InvokeHookArgs, error) {
	args := cpex.InvokeHookArgs{HookType: cpex.HookType(r.GetHookType()), PluginName: r.GetPluginName()}
	if r.GetPayload() != nil {
		raw, err := StructToJSON(nil, r.GetPayload())
		if err != nil {
			return args, fmt.Errorf("payload: %w", err)
		}
		args.Payload = raw
	}
	c, err := ContextFromPB(r.GetContext())
	if err != nil {
		return args, err
	}
	args.Context = c
	return args, nil
}

// ReplyFromPB maps an InvokeHook response onto the invoke_hook reply. The
// result is read from result (the whole PluginResult), falling back to
// result_base, which cpex servers never set.
func ReplyFromPB(r *InvokeHookResponse) (*cpex.InvokeHookReply, error) {
	reply := &cpex.InvokeHookReply{PluginName: r.GetPluginName()}
	switch {
	case r.GetResult() != nil:
		raw, err := StructToJSON(nil, r.GetResult())
		if err != nil {
			return nil, fmt.Errorf("result: %w", err)
		}
		reply.Result = new(cpex.PluginResult)
		if err := json.Unmarshal(raw, reply.Result); err != nil {
			return nil, fmt.Errorf("result: %w", err)
		}
	case r.GetResultBase() != nil:
		reply.Result = resultFromBase(r.GetResultBase())
	}
	if e := r.GetError(); e != nil {
		reply.Error = &cpex.PluginErrorModel{
			Message: e.GetMessage(), PluginName: e.GetPluginName(), Code: e.GetCode(),
			Details: e.GetDetails().AsMap(), MCPErrorCode: intOrNil(e.GetMcpErrorCode()),
		}
	}
	c, err := ContextFromPB(r.GetContext())
	if err != nil {
		return nil, err
	}
	reply.Context = c
	return reply, nil
}

func resultFromBase(b *PluginResultBase) *cpex.PluginResult {
	cont := b.GetContinueProcessing()
	res := &cpex.PluginResult{ContinueProcessing: &cont}
	if m := b.GetMetadata(); m != nil {
		res.Metadata = m.AsMap()
	}
	if v := b.GetViolation(); v != nil {
		res.Violation = &cpex.PluginViolation{
			Reason: v.GetReason(), Description: v.GetDescription(), Code: v.GetCode(),
			PluginName: v.GetPluginName(), Details: v.GetDetails().AsMap(),
			MCPErrorCode: intOrNil(v.GetMcpErrorCode()),
		}
	}
	return res
}

func intOrNil(n int32) *int {
	if n == 0 {
		return nil
	}
	i := int(n)
	return &i
}

// ReplyToPB maps an invoke_hook reply onto an InvokeHook response (result
// carries the whole PluginResult; result_base stays unset, as cpex does).
func ReplyToPB(r *cpex.InvokeHookReply) (*InvokeHookResponse, error) {
	out := &InvokeHookResponse{PluginName: r.PluginName}
	if r.Result != nil {
		raw, err := json.Marshal(r.Result)
		if err != nil {
			return nil, fmt.Errorf("result: %w", err)
		}
		if out.Result, err = StructFromJSON(raw); err != nil {
			return nil, fmt.Errorf("result: %w", err)
		}
	}
	if e := r.Error; e != nil {
		details, err := StructFromMap(e.Details)
		if err != nil {
			return nil, fmt.Errorf("error details: %w", err)
		}
		out.Error = &PluginError{Message: e.Message, PluginName: e.PluginName, Code: e.Code, Details: details}
		if e.MCPErrorCode != nil {
			out.Error.McpErrorCode = int32(*e.MCPErrorCode)
		}
	}
	c, err := ContextToPB(r.Context)
	if err != nil {
		return nil, err
	}
	out.Context = c
	return out, nil
}

// ContextToPB converts a plugin context; nil gives nil.
func ContextToPB(c *cpex.PluginContext) (*PluginContext, error) {
	if c == nil {
		return nil, nil
	}
	g := &c.GlobalContext
	out := &PluginContext{GlobalContext: &GlobalContext{
		RequestId: g.RequestID, ServerId: g.ServerID, TenantId: g.TenantID,
	}}
	var err error
	for _, f := range []struct {
		dst **structpb.Struct
		src map[string]any
	}{
		{&out.State, c.State}, {&out.Metadata, c.Metadata},
		{&out.GlobalContext.State, g.State}, {&out.GlobalContext.Metadata, g.Metadata},
	} {
		if *f.dst, err = StructFromMap(f.src); err != nil {
			return nil, fmt.Errorf("context: %w", err)
		}
	}
	if err := setUser(out.GlobalContext, g.User); err != nil {
		return nil, err
	}
	return out, nil
}

// setUser sets the user oneof from the JSON user (a string or an object).
func setUser(g *GlobalContext, raw json.RawMessage) error {
	v, err := ValueFromJSON(raw)
	if err != nil {
		return fmt.Errorf("context user: %w", err)
	}
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		g.UserValue = &GlobalContext_UserString{UserString: k.StringValue}
	case *structpb.Value_StructValue:
		g.UserValue = &GlobalContext_UserStruct{UserStruct: k.StructValue}
	case nil, *structpb.Value_NullValue:
	default:
		return fmt.Errorf("context user: want a string or an object, got %s", raw)
	}
	return nil
}

// ContextFromPB converts a plugin context; nil gives nil. Maps are never nil.
func ContextFromPB(c *PluginContext) (*cpex.PluginContext, error) {
	if c == nil {
		return nil, nil
	}
	g := c.GetGlobalContext()
	out := cpex.NewContext(cpex.GlobalContext{
		RequestID: g.GetRequestId(), ServerID: g.GetServerId(), TenantID: g.GetTenantId(),
		State: mapOf(g.GetState()), Metadata: mapOf(g.GetMetadata()),
	})
	out.State, out.Metadata = mapOf(c.GetState()), mapOf(c.GetMetadata())
	switch u := g.GetUserValue().(type) {
	case *GlobalContext_UserString:
		raw, err := json.Marshal(u.UserString)
		if err != nil {
			return nil, fmt.Errorf("context user: %w", err)
		}
		out.GlobalContext.User = raw
	case *GlobalContext_UserStruct:
		raw, err := StructToJSON(nil, u.UserStruct)
		if err != nil {
			return nil, fmt.Errorf("context user: %w", err)
		}
		out.GlobalContext.User = raw
	}
	return out, nil
}

func mapOf(s *structpb.Struct) map[string]any {
	if s == nil {
		return map[string]any{}
	}
	return s.AsMap()
}

// StructFromMap converts a map of JSON-decoded values (nil gives nil); other Go
// values (typed slices and maps, structs) go through encoding/json.
func StructFromMap(m map[string]any) (*structpb.Struct, error) {
	if m == nil {
		return nil, nil
	}
	if s, err := structpb.NewStruct(m); err == nil {
		return s, nil
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return StructFromJSON(raw)
}
