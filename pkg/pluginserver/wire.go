package pluginserver

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpexpb"
)

// The protobuf side of the server, shared by the gRPC and Unix-socket
// transports: each function answers one request message, never failing
// (problems become error replies, as on the MCP transport).

// CodeUnknownMessage is the error code of the reply to a Unix-socket frame
// that is no known request, as cpex sends it.
const CodeUnknownMessage = "UNKNOWN_MESSAGE"

func (s *Server) pbInvoke(ctx context.Context, req *cpexpb.InvokeHookRequest) *cpexpb.InvokeHookResponse {
	var reply *cpex.InvokeHookReply
	if args, err := cpexpb.ArgsFromPB(req); err != nil {
		reply = errorReply(req.GetPluginName(), CodeInvalidArgs, fmt.Sprintf("invoke_hook: invalid arguments: %v", err))
	} else {
		reply = s.invoke(ctx, args)
	}
	resp, err := cpexpb.ReplyToPB(reply)
	if err != nil {
		s.log.Warn().Err(err).Str("plugin", req.GetPluginName()).Msg("reply does not convert to protobuf")
		resp, _ = cpexpb.ReplyToPB(errorReply(reply.PluginName, CodePluginError, fmt.Sprintf("reply does not convert to protobuf: %v", err)))
	}
	return resp
}

func (s *Server) pbConfig(name string) *cpexpb.GetPluginConfigResponse {
	p, ok := s.lookup(name)
	if !ok {
		return &cpexpb.GetPluginConfigResponse{}
	}
	cfg, err := cpexpb.StructFromMap(p.Config())
	if err != nil {
		s.log.Warn().Err(err).Str("plugin", p.Name()).Msg("plugin config does not convert to protobuf")
		return &cpexpb.GetPluginConfigResponse{}
	}
	return &cpexpb.GetPluginConfigResponse{Found: true, Config: cfg}
}

func (s *Server) pbConfigs() *cpexpb.GetPluginConfigsResponse {
	out := &cpexpb.GetPluginConfigsResponse{Configs: make([]*structpb.Struct, 0, len(s.plugins))}
	for _, p := range s.plugins {
		cfg, err := cpexpb.StructFromMap(p.Config())
		if err != nil {
			s.log.Warn().Err(err).Str("plugin", p.Name()).Msg("plugin config does not convert to protobuf")
			continue
		}
		out.Configs = append(out.Configs, cfg)
	}
	return out
}

func unknownMessage() *cpexpb.InvokeHookResponse {
	return &cpexpb.InvokeHookResponse{Error: &cpexpb.PluginError{
		Message: "Unknown message type", Code: CodeUnknownMessage, McpErrorCode: MCPInternalError,
	}}
}
