package processor

import (
	"bytes"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/contentcoding"
	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
	"github.com/mcp-extproc/mcp-extproc/pkg/sse"
)

// responseHeaders picks the response body mode: NONE when no post hook can
// apply, BUFFERED for JSON, STREAMED for SSE (docs/extproc-contract.md §3).
func (st *stream) responseHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	if st.phase == phaseRequestBody {
		// We asked for the request body and never got it: Envoy ignored our
		// mode_override, so no pre hook ran. Never pass that silently.
		st.obs.Immediate("internal")
		st.logger().Error().Msg("request body was never sent: set allow_mode_override: true on the ext_proc filter")
		return jsonRPCReply(http.StatusInternalServerError, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInternalError,
			"mcp-extproc misconfigured: Envoy did not send the request body (allow_mode_override must be true)", nil), false, nil)
	}
	sets, refused := st.postRequest(h) // httppost.go
	if refused != nil {
		return refused
	}
	return withSetHeaders(st.responseMode(h), (*extprocv3.ProcessingResponse).GetResponseHeaders, sets)
}

// responseMode answers the response headers with the body mode.
func (st *stream) responseMode(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	if len(st.pending) == 0 && !st.foreign && len(st.records) == 0 && !st.recorded && !st.recordsRequests() {
		return st.responseNone()
	}
	var status int
	var contentType, encoding string
	for _, hv := range h.GetHeaders().GetHeaders() {
		switch hv.GetKey() {
		case ":status":
			status, _ = strconv.Atoi(headerValue(hv))
		case "content-type":
			contentType = headerValue(hv)
		case "content-encoding":
			encoding = contentcoding.Normalize(headerValue(hv))
		}
	}
	mediaType, _, _ := mime.ParseMediaType(contentType)
	st.commitRecords(status, mediaType)
	switch {
	case (len(st.pending) == 0 && !st.foreign) || h.GetEndOfStream():
		return st.responseNone()
	case status < 200 || status > 299:
		return st.responseNone()
	case mediaType == "application/json":
		st.phase = phaseResponseJSON
		st.answerEncoding = encoding
		st.obs.ModeOverride("response_buffered")
		return st.canned.responseBuffered
	case mediaType == "text/event-stream" && encoding != "":
		return st.encodedStream(encoding)
	case mediaType == "text/event-stream":
		st.phase = phaseResponseSSE
		st.sse = sse.NewDecoder(int(st.snap.Settings.MaxBodyBytes))
		st.obs.ModeOverride("response_streamed")
		return st.canned.responseStreamed
	default:
		return st.responseNone()
	}
}

func (st *stream) responseNone() *extprocv3.ProcessingResponse {
	st.phase = phaseResponseNone
	st.obs.ModeOverride("response_none")
	return st.canned.responseNone
}

// responseBody runs post hooks on a buffered JSON body or on SSE chunks.
func (st *stream) responseBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	switch st.phase {
	case phaseResponseJSON:
		return st.bufferedResponse(b.GetBody())
	case phaseResponseSSE:
		return st.streamedResponse(b.GetBody(), b.GetEndOfStream())
	case phaseResponseDropped:
		return bodyReply(true, []byte{}, false)
	default:
		return st.canned.responseBodyAsIs
	}
}

func (st *stream) bufferedResponse(body []byte) *extprocv3.ProcessingResponse {
	if max := st.snap.Settings.MaxBodyBytes; max > 0 && int64(len(body)) > max {
		return st.tooLargeResponse(len(body))
	}
	if st.answerEncoding != "" {
		// The server compressed although Accept-Encoding was removed
		// (readsAnswer): read it decoded, under the same cap as a request.
		dec, err := contentcoding.Decode(st.answerEncoding, body, st.decodedLimit())
		if err != nil {
			if errs := st.unreadableEncoded(err); errs != nil {
				return st.answerReplaced(errs)
			}
			return st.canned.responseBodyAsIs
		}
		body = dec
	}
	st.obs.BodyInspected("response", len(body))
	msgs, err := mcpmsg.Parse(body)
	if err != nil {
		if errs := st.unreadable(body, err); errs != nil {
			return st.answerReplaced(errs)
		}
		return st.canned.responseBodyAsIs
	}
	replaced := st.postHooks(msgs)
	if replaced == nil {
		return st.canned.responseBodyAsIs // as it came, encoded or not
	}
	return st.answerReplaced(mcpmsg.Join(msgs, replaced))
}

// answerReplaced replaces a buffered answer with body; one that came
// content-encoded goes out decoded, without its content-encoding.
func (st *stream) answerReplaced(body []byte) *extprocv3.ProcessingResponse {
	if st.answerEncoding != "" {
		return decodedBodyReply(body)
	}
	return bodyReply(true, body, true)
}

// unreadableEncoded handles a JSON answer whose content-encoding cannot be
// undone (unknown, corrupt, or over the cap once decoded): refused like an
// answer that does not parse when anything read from it fails closed,
// else passed as the server's own.
func (st *stream) unreadableEncoded(err error) []byte {
	if !st.overflowFailsClosed() {
		st.logger().Warn().Err(err).Msg("encoded response cannot be decoded; passed unchanged (plugins fail open)")
		return nil
	}
	st.obs.Immediate("invalid_response")
	st.logger().Warn().Err(err).Msg("refused: encoded response cannot be decoded, so its post hooks or rules cannot run")
	why := "the server's answer cannot be inspected: " + err.Error()
	if errs := st.failPending(why); len(errs) > 0 {
		return joinErrors(errs)
	}
	return mcpmsg.ErrorResponse(nil, mcpmsg.CodeInternalError, why, nil) // results of other streams only
}

// encodedStream answers the headers of an SSE answer that comes
// content-encoded although Accept-Encoding was removed (a middleware that
// compresses regardless). Its events cannot be read one by one, so when
// anything read from it fails closed (a pending post hook or list, or a
// replay a post hook or the rules must read) the whole answer is refused:
// the pending requests get their JSON-RPC errors, a replay one without an
// id. Else it passes unread, with a warning.
func (st *stream) encodedStream(encoding string) *extprocv3.ProcessingResponse {
	if !st.overflowFailsClosed() {
		st.logger().Warn().Str("content_encoding", logsafe.Cap(encoding, logsafe.DefaultCap)).Msg("encoded SSE answer passed unread (plugins fail open)")
		return st.responseNone()
	}
	st.phase = phaseResponseNone
	st.obs.Immediate("invalid_response")
	st.logger().Warn().Str("content_encoding", logsafe.Cap(encoding, logsafe.DefaultCap)).Msg("refused: SSE answer is content-encoded, so its post hooks or rules cannot run")
	const why = "the server's answer cannot be inspected: an event stream with content-encoding "
	errs := st.failPending(why + encoding)
	if len(errs) == 0 {
		return jsonRPCReply(http.StatusBadGateway, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInternalError, why+encoding, nil), false, nil)
	}
	return jsonRPCReply(http.StatusOK, joinErrors(errs), false, nil)
}

// joinErrors is one error message as it is, several as a JSON array.
func joinErrors(errs [][]byte) []byte {
	if len(errs) == 1 {
		return errs[0]
	}
	return joinArray(errs)
}

// tooLargeResponse applies the on_error policy to a response body that
// cannot be inspected: fail closed answers every pending id with an error,
// fail open passes the body unchanged.
func (st *stream) tooLargeResponse(n int) *extprocv3.ProcessingResponse {
	max := st.snap.Settings.MaxBodyBytes
	if !st.pendingFailClosed() {
		st.logger().Warn().Int("bytes", n).Int64("limit", max).Msg("response over the inspection limit passed uninspected (plugins fail open)")
		return st.canned.responseBodyAsIs
	}
	st.obs.Immediate("too_large")
	st.logger().Warn().Int("bytes", n).Int64("limit", max).Msg("refused: response over the inspection limit")
	return bodyReply(true, joinErrors(st.failPending(fmt.Sprintf("response of %d bytes exceeds the inspection limit of %d bytes", n, max))), true)
}

// unreadable handles a JSON answer that is not valid JSON-RPC. One that
// is an object or an array (say, with a duplicate member, which a lenient
// client reads one way or the other) is refused when a pending request's
// post hook fails closed or the rules filter a pending list: the client
// must not read unhooked what it could not be shown hooked; the errors
// returned replace it. Anything else returns nil and passes as the
// server's own answer (nothing to hook; the client reports it). An SSE
// event that does not parse passes as before (response_sse.go): it may be
// anything, and the pending result is still to come.
func (st *stream) unreadable(body []byte, err error) []byte {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if !st.pendingFailClosed() || len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') {
		st.logger().Warn().Err(err).Msg("response is not valid JSON-RPC; passed unchanged")
		return nil
	}
	st.obs.Immediate("invalid_response")
	st.logger().Warn().Err(err).Msg("refused: response is not valid JSON-RPC, so its post hooks or rules cannot run")
	return joinErrors(st.failPending("the server's answer cannot be inspected: " + err.Error()))
}

// failPending answers every pending request with an internal error saying
// why, in a stable order, and forgets them.
func (st *stream) failPending(message string) [][]byte {
	ids := slices.Sorted(maps.Keys(st.pending))
	errs := make([][]byte, 0, len(ids))
	for _, id := range ids {
		errs = append(errs, mcpmsg.ErrorResponse([]byte(id), mcpmsg.CodeInternalError, message, nil))
	}
	st.pending = nil
	return errs
}

func (st *stream) pendingFailClosed() bool {
	for _, p := range st.pending {
		if p.list != nil {
			return true // nothing the rules hide may pass unfiltered
		}
		if (p.hook || p.unknown) && st.snap.Hooks.FailClosed(p.target.Family.Post) {
			return true
		}
	}
	return false
}

// postHooks runs the post hook of every response in msgs whose id is pending
// and returns the replaced elements, or nil when nothing changed.
func (st *stream) postHooks(msgs *mcpmsg.Body) map[int][]byte {
	var replaced map[int][]byte
	for i := range msgs.Messages {
		m := &msgs.Messages[i]
		if m.Kind != mcpmsg.KindResponse && m.Kind != mcpmsg.KindError {
			continue
		}
		key := idKey(m.ID)
		p, ok := st.pending[string(key)]
		if ok && key != nil {
			delete(st.pending, string(key))
		} else if p = st.foreignCall(m.ID, key); p == nil {
			continue
		}
		if m.Kind == mcpmsg.KindError {
			continue // the server refused; nothing to inspect
		}
		var msg []byte
		if p.list != nil {
			msg = st.filterList(m, p.list) // rules.go
		} else {
			msg = st.postHook(i, m, p)
		}
		if msg != nil {
			if replaced == nil {
				replaced = make(map[int][]byte)
			}
			replaced[i] = msg
		}
	}
	return replaced
}

// foreignCall returns what a response to none of this stream's pending
// requests answers, or nil when it passes: on a stream that may carry
// other streams' results, an id not of this stream is looked up.
func (st *stream) foreignCall(id, key []byte) *pendingCall {
	if !st.foreign {
		return nil
	}
	if _, mine := st.own[string(key)]; mine && key != nil {
		return nil
	}
	return st.attribute(id)
}

// postHook runs the post hook on one result and returns the message that
// replaces it, or nil when it goes on unchanged.
func (st *stream) postHook(i int, m *mcpmsg.Message, p *pendingCall) []byte {
	if p.route == nil { // nothing is known of the request
		return st.unattributed(m)
	}
	if p.route.Method == "tools/call" {
		st.recordTask(m.Result, p.target.Name)
	}
	inner, ok := p.route.HookedResult(m.Result)
	switch {
	case !ok:
		return nil // input_required, a task status: not a result
	case p.unknown:
		return st.unattributed(m)
	case !p.hook:
		return nil
	}
	f := p.target.Family
	payload, err := f.PostPayload(p.target.Name, inner)
	if err != nil {
		return mcpmsg.ErrorResponse(m.ID, mcpmsg.CodeInternalError, "response cannot be inspected: "+err.Error(), nil)
	}
	out := st.snap.Hooks.Run(st.ctx, f.Post, payload, p.rc, p.target)
	if r, blocked := st.refusalOf(out, i, m.ID, f.Post); blocked {
		st.decision.raise(decisionBlocked, r.by, r.byKind, r.violation)
		return r.errorResponse()
	}
	if !out.Modified {
		return nil
	}
	st.decision.raise(decisionModified, "", "", "")
	result, err := f.ResultOf(out.Payload)
	if err == nil {
		result, err = p.route.WithHookedResult(m.Result, result)
	}
	var msg []byte
	if err == nil {
		msg, err = mcpmsg.ReplaceResult(*m, result)
	}
	if err != nil {
		st.logger().Warn().Err(err).Str("hook", string(f.Post)).Msg("plugin returned an unusable result; refused")
		return mcpmsg.ErrorResponse(m.ID, mcpmsg.CodeInternalError, "plugin returned an unusable result: "+err.Error(), nil)
	}
	return msg
}
