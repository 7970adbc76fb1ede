package processor

import (
	"net/http"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
)

// What the ext_proc filter is configured with, as far as the first message of
// a stream tells: Envoy sends its body modes in protocol_config, and marks
// every message of an observability-mode filter.

// checkFilter refuses a stream whose filter streams a body FULL_DUPLEX: that
// mode ignores mode_override, wants streamed_response body mutations and
// sends a body in chunks the processor would parse one by one, so the
// processor cannot inspect anything correctly. Every message of such a
// stream is answered with a 500 immediate response (valid after any
// message, docs/extproc-contract.md §2), and the first one is logged.
func (s *Server) checkFilter(st *stream, req *extprocv3.ProcessingRequest) {
	pc := req.GetProtocolConfig()
	const duplex = filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	if pc.GetRequestBodyMode() != duplex && pc.GetResponseBodyMode() != duplex {
		return
	}
	if !s.warnedDuplex.Swap(true) {
		st.x.log.Error().Str("request_body_mode", pc.GetRequestBodyMode().String()).
			Str("response_body_mode", pc.GetResponseBodyMode().String()).
			Msg("ext_proc filter misconfigured: FULL_DUPLEX_STREAMED is not supported; every request is refused with 500 (use request_body_mode NONE or BUFFERED, response_body_mode NONE, allow_mode_override: true)")
	}
	st.x.obs.Immediate("internal")
	st.refused = jsonRPCReply(http.StatusInternalServerError, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInternalError,
		"mcp-extproc misconfigured: the ext_proc filter uses FULL_DUPLEX_STREAMED, which it does not support", nil), false, nil)
}

// warnObservability logs once that the filter runs in observability mode.
func (s *Server) warnObservability() {
	if !s.warnedObservability.Swap(true) {
		s.opts.Logger.Warn().Msg("ext_proc filter runs in observability_mode: Envoy applies no reply, so plugins cannot enforce anything; messages are not answered and no plugin is called")
	}
}
