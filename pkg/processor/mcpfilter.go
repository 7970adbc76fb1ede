package processor

import (
	"net/http"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// Envoy's MCP filter (envoy.filters.http.mcp), placed before ext_proc,
// holds the request headers until it has parsed the body of an MCP POST,
// and writes what it read (jsonrpc, method, id, params.name or params.uri,
// is_mcp_request) to dynamic metadata, which metadata_options forwards on
// the request-headers message. For a request whose headers do not name its
// method (MCP 2025-11-25 and older), that method decides at the request
// headers whether the answer must be read: a tools/call with no post hook
// costs no response-headers message, rules or not.
//
// Envoy's parse is not the one that counts: the body is still read, and a
// body whose method is not the one Envoy read (duplicate keys read two
// ways, a method past the filter's max_request_body_size) is refused, since
// its answer may have been let through unread.

// mcpFilterMethod keeps the method Envoy's MCP filter read from this
// request's body, when the configuration reads the filter's namespace and
// Envoy sent it. Called at the request headers of an MCP POST.
func (st *stream) mcpFilterMethod() {
	ns := st.snap.Settings.MCPFilterMetadata()
	if ns == "" {
		return
	}
	f, _ := st.envoyMetadata().Namespace(ns)
	if mcp, _ := f.Field("is_mcp_request").Bool(); !mcp {
		return
	}
	st.envoyMethod, _ = f.Field("method").String()
}

// checkMCPFilterMethod refuses a body that is not one message of the
// method Envoy's MCP filter read: HTTP 400 and JSON-RPC -32600 (with the
// request's id when there is one).
func (st *stream) checkMCPFilterMethod(msgs *mcpmsg.Body) *extprocv3.ProcessingResponse {
	if st.envoyMethod == "" {
		return nil
	}
	var id []byte
	if !msgs.Batch && len(msgs.Messages) == 1 {
		m := &msgs.Messages[0]
		if m.Method == st.envoyMethod {
			return nil
		}
		id = m.ID
	}
	st.obs.Immediate("mcp_filter_mismatch")
	st.logger().Info().Str("envoy_method", st.envoyMethod).Msg("refused: the body is not the request Envoy's MCP filter read")
	return jsonRPCReply(http.StatusBadRequest, mcpmsg.ErrorResponse(id, mcpmsg.CodeInvalidRequest,
		"the request's method is not the one Envoy's MCP filter read from it (duplicate or late keys?)", nil), false, nil)
}
