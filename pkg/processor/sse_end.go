package processor

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// responseTrailers answers the response trailers. A streamed SSE response
// asks for them (modeResponseStreamed) because with trailers no body chunk
// carries end_of_stream: the trailers are then the end of the body, and the
// only place left to settle bytes the processor held back.
//
// A trailers reply carries no body, so held bytes can no longer go out. They
// are the start of an event the server never terminated, which a conforming
// SSE client discards at the end of the stream anyway. If a hooked call is
// still waiting for its result and its plugins fail closed, the result may be
// in those bytes: the stream is reset (an immediate response after the
// response headers went out, docs/extproc-contract.md §6) so the client sees
// a failure rather than waiting for an answer that will not come.
func (st *stream) responseTrailers(*extprocv3.HttpTrailers) *extprocv3.ProcessingResponse {
	if st.phase != phaseResponseSSE || st.sse == nil {
		return st.canned.responseTrailers
	}
	held := len(st.sse.Pending())
	if held == 0 {
		return st.canned.responseTrailers
	}
	if len(st.pending) > 0 && st.pendingFailClosed() {
		st.logger().Warn().Int("held_bytes", held).Int("pending", len(st.pending)).
			Msg("refused: SSE stream ended with trailers inside an event while a hooked result was pending; stream reset")
		st.phase = phaseResponseDropped
		st.pending = nil
		return internalError(st, "SSE stream ended inside an event")
	}
	st.logger().Warn().Int("held_bytes", held).Msg("SSE stream ended with trailers inside an event: the unterminated event is dropped, as a conforming client would drop it")
	st.phase = phaseResponseNone
	return st.canned.responseTrailers
}
