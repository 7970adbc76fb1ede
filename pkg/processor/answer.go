package processor

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"strconv"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/audit"
	"github.com/mcp-extproc/mcp-extproc/pkg/contentcoding"
	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
	"github.com/mcp-extproc/mcp-extproc/pkg/sse"
)

// The answer is read when its request's plan asked for the response
// headers and something awaits it (results.go): a buffered JSON body
// (jsonAnswer) or a streamed SSE body event by event (sseAnswer, sse.go).
// Each JSON-RPC response in it is matched to its request (results.match)
// and gets what it was awaited for: the post hook of its family, the list
// filter (rules, pinning, list hooks: rules.go), or the
// unattributed_responses policy.

// readAnswer answers the response headers with the body mode and returns
// the phase that reads the body (docs/extproc-contract.md §3).
func (st *stream) readAnswer(h *extprocv3.HttpHeaders) (*extprocv3.ProcessingResponse, phase) {
	x := &st.x
	res := &x.results
	if !res.reading() && !res.waiting() && !res.recordsRequests() {
		return x.answerUnread(), passThrough{}
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
	res.commit(status, mediaType)
	switch {
	case !res.reading() || h.GetEndOfStream(), status < 200 || status > 299:
		return x.answerUnread(), passThrough{}
	case mediaType == "application/json":
		st.json = jsonAnswer{reader: reader{x}, encoding: encoding}
		x.obs.ModeOverride("response_buffered")
		return x.canned.responseBuffered, &st.json
	case mediaType == "text/event-stream" && encoding != "":
		return x.encodedStream(encoding), passThrough{}
	case mediaType == "text/event-stream":
		st.sse = sseAnswer{reader: reader{x}, dec: newSSEDecoder(x.snap)}
		x.obs.ModeOverride("response_streamed")
		return x.canned.responseStreamed, &st.sse
	}
	return x.answerUnread(), passThrough{}
}

func (x *exchange) answerUnread() *extprocv3.ProcessingResponse {
	x.obs.ModeOverride("response_none")
	return x.canned.responseNone
}

// encodedStream answers the headers of an SSE answer that comes
// content-encoded although Accept-Encoding was removed (a middleware that
// compresses regardless). Its events cannot be read one by one, so when
// anything read from it fails closed (an awaited post hook or list, or a
// replay a post hook or the rules must read) the whole answer is refused:
// the awaited requests get their JSON-RPC errors, a replay one without an
// id. Else it passes unread, with a warning.
func (x *exchange) encodedStream(encoding string) *extprocv3.ProcessingResponse {
	if !x.results.unreadFailsClosed() {
		x.logger().Warn().Str("content_encoding", logsafe.Cap(encoding, logsafe.DefaultCap)).Msg("encoded SSE answer passed unread (plugins fail open)")
		return x.answerUnread()
	}
	x.obs.Immediate("invalid_response")
	x.logger().Warn().Str("content_encoding", logsafe.Cap(encoding, logsafe.DefaultCap)).Msg("refused: SSE answer is content-encoded, so its post hooks or rules cannot run")
	const why = "the server's answer cannot be inspected: an event stream with content-encoding "
	errs := x.results.failAwaited(why + encoding)
	if len(errs) == 0 {
		return jsonRPCReply(http.StatusBadGateway, mcpmsg.ErrorResponse(nil, mcpmsg.CodeInternalError, why+encoding, nil), false, nil)
	}
	return jsonRPCReply(http.StatusOK, joinErrors(errs), false, nil)
}

// reader gives the responses of an answer what their requests await;
// jsonAnswer and sseAnswer read with it.
type reader struct{ x *exchange }

// parse parses an answer's body (or event data); when a list is awaited,
// indexing it as it validates (mcpmsg.ParseList), or as the Server's memo
// of list answers remembers it (listmemo.go): the Body returned is then
// shared with other streams and must not be written. owned reports that
// body is the answer's own, never written or reused (listMemo.parse).
func (rd reader) parse(body []byte, owned bool) (*mcpmsg.Body, error) {
	if k, ok := rd.x.results.listKeys(); ok {
		b, from, err := rd.x.results.lists.parse(body, k, owned)
		if from != "" {
			rd.x.obs.ListRead(from)
		}
		return b, err
	}
	return mcpmsg.Parse(body)
}

// jsonAnswer reads a buffered JSON answer.
type jsonAnswer struct {
	reader
	// encoding is the answer's content-encoding, "" for identity.
	encoding string
}

// body runs what the results await on a buffered JSON body.
func (j *jsonAnswer) body(body []byte) *extprocv3.ProcessingResponse {
	x := j.x
	if max := x.snap.Settings.MaxBodyBytes; max > 0 && int64(len(body)) > max {
		return j.tooLarge(len(body))
	}
	if j.encoding != "" {
		// The server compressed although Accept-Encoding was removed
		// (plan.readAnswer): read it decoded, under the same cap as a
		// request.
		dec, err := contentcoding.Decode(j.encoding, body, decodedLimit(x.snap))
		if err != nil {
			if errs := j.unreadableEncoded(err); errs != nil {
				return j.replaced(errs)
			}
			return x.canned.responseBodyAsIs
		}
		body = dec
	}
	x.obs.BodyInspected("response", len(body))
	msgs, err := j.parse(body, true) // decoded from its message (the codec, server.go), or decoded anew
	if err != nil {
		if errs := j.unreadable(body, err); errs != nil {
			return j.replaced(errs)
		}
		return x.canned.responseBodyAsIs
	}
	replaced := j.answered(msgs)
	if replaced == nil {
		return x.canned.responseBodyAsIs // as it came, encoded or not
	}
	return j.replaced(mcpmsg.Join(msgs, replaced))
}

// replaced replaces the answer with body; one that came content-encoded
// goes out decoded, without its content-encoding.
func (j *jsonAnswer) replaced(body []byte) *extprocv3.ProcessingResponse {
	if j.encoding != "" {
		return decodedBodyReply(body)
	}
	return bodyReply(true, body, true)
}

// unreadableEncoded handles a JSON answer whose content-encoding cannot be
// undone (unknown, corrupt, or over the cap once decoded): refused like an
// answer that does not parse when anything read from it fails closed,
// else passed as the server's own.
func (j *jsonAnswer) unreadableEncoded(err error) []byte {
	x := j.x
	if !x.results.unreadFailsClosed() {
		x.logger().Warn().Err(err).Msg("encoded response cannot be decoded; passed unchanged (plugins fail open)")
		return nil
	}
	x.obs.Immediate("invalid_response")
	x.logger().Warn().Err(err).Msg("refused: encoded response cannot be decoded, so its post hooks or rules cannot run")
	why := "the server's answer cannot be inspected: " + err.Error()
	if errs := x.results.failAwaited(why); len(errs) > 0 {
		return joinErrors(errs)
	}
	return mcpmsg.ErrorResponse(nil, mcpmsg.CodeInternalError, why, nil) // results of other streams only
}

// joinErrors is one error message as it is, several as a JSON array.
func joinErrors(errs [][]byte) []byte {
	if len(errs) == 1 {
		return errs[0]
	}
	return joinArray(errs)
}

// tooLargeAnswer applies the on_error policy to a response body that
// cannot be inspected: fail closed answers every awaited id with an
// error, fail open passes the body unchanged.
func (rd reader) tooLarge(n int) *extprocv3.ProcessingResponse {
	x := rd.x
	max := x.snap.Settings.MaxBodyBytes
	if !x.results.awaitedFailClosed() {
		x.logger().Warn().Int("bytes", n).Int64("limit", max).Msg("response over the inspection limit passed uninspected (plugins fail open)")
		return x.canned.responseBodyAsIs
	}
	x.obs.Immediate("too_large")
	x.logger().Warn().Int("bytes", n).Int64("limit", max).Msg("refused: response over the inspection limit")
	return bodyReply(true, joinErrors(x.results.failAwaited(fmt.Sprintf("response of %d bytes exceeds the inspection limit of %d bytes", n, max))), true)
}

// unreadable handles a JSON answer that is not valid JSON-RPC. One that
// is an object or an array (say, with a duplicate member, which a lenient
// client reads one way or the other) is refused when an awaited request's
// post hook fails closed or the rules filter an awaited list: the client
// must not read unhooked what it could not be shown hooked; the errors
// returned replace it. Anything else returns nil and passes as the
// server's own answer (nothing to hook; the client reports it). An SSE
// event that does not parse passes as before (sse.go): it may be
// anything, and the awaited result is still to come.
func (rd reader) unreadable(body []byte, err error) []byte {
	x := rd.x
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if !x.results.awaitedFailClosed() || len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') {
		x.logger().Warn().Err(err).Msg("response is not valid JSON-RPC; passed unchanged")
		return nil
	}
	x.obs.Immediate("invalid_response")
	x.logger().Warn().Err(err).Msg("refused: response is not valid JSON-RPC, so its post hooks or rules cannot run")
	return joinErrors(x.results.failAwaited("the server's answer cannot be inspected: " + err.Error()))
}

// answered gives each response of msgs what its request awaits and
// returns the replaced elements, or nil when nothing changed.
func (rd reader) answered(msgs *mcpmsg.Body) map[int][]byte {
	x := rd.x
	var replaced map[int][]byte
	for i := range msgs.Messages {
		m := &msgs.Messages[i]
		if m.Kind != mcpmsg.KindResponse && m.Kind != mcpmsg.KindError {
			continue
		}
		a := x.results.match(m)
		if a == nil || m.Kind == mcpmsg.KindError {
			continue // passes; or the server refused: nothing to inspect
		}
		var msg []byte
		if a.kind == awaitList {
			msg = rd.filterList(m, a) // rules.go
		} else {
			msg = rd.postHook(i, m, a)
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

// postHook runs the post hook on one result and returns the message that
// replaces it, or nil when it goes on unchanged.
func (rd reader) postHook(i int, m *mcpmsg.Message, a *awaited) []byte {
	x := rd.x
	if a.route == nil { // nothing is known of the request
		return rd.unattributed(m)
	}
	x.results.recordTask(a, m.Result)
	inner, ok := a.route.HookedResult(m.Result)
	switch {
	case !ok:
		return nil // input_required, a task status: not a result
	case a.kind == awaitUnknown:
		return rd.unattributed(m)
	case a.kind != awaitHooked:
		return nil
	}
	f := a.target.Family
	payload, err := f.PostPayload(a.target.Name, inner)
	if err != nil {
		return mcpmsg.ErrorResponse(m.ID, mcpmsg.CodeInternalError, "response cannot be inspected: "+err.Error(), nil)
	}
	if a.event >= 0 { // the call has an audit event (trail.go)
		x.trail.result(a.event, inner)
	}
	out := x.runHook(a.event, f.Post, payload, a.rc, a.target)
	shadow := x.shadow()
	if r, blocked := x.refusalOf(out, i, m.ID, f.Post); blocked {
		x.trail.refused(a.event, &r, shadow, audit.PhaseResponse)
		if shadow {
			x.obs.Shadowed(r.byKind, r.by, string(audit.DecisionWouldDeny))
			return nil
		}
		x.decision.raise(decisionBlocked, r.by, r.byKind, r.violation)
		return r.errorResponse()
	}
	if !out.Modified {
		return nil
	}
	if a.event >= 0 {
		x.trail.changed(a.event, byPlugin, "", shadow, audit.PhaseResponse)
	}
	if shadow {
		x.obs.Shadowed(byPlugin, "", string(audit.DecisionWouldModify))
		return nil
	}
	x.decision.raise(decisionModified, "", "", "")
	result, err := f.ResultOf(out.Payload)
	if err == nil {
		result, err = a.route.WithHookedResult(m.Result, result)
	}
	var msg []byte
	if err == nil {
		msg, err = mcpmsg.ReplaceResult(*m, result)
	}
	if err != nil {
		x.logger().Warn().Err(err).Str("hook", string(f.Post)).Msg("plugin returned an unusable result; refused")
		return mcpmsg.ErrorResponse(m.ID, mcpmsg.CodeInternalError, "plugin returned an unusable result: "+err.Error(), nil)
	}
	return msg
}

// unattributed applies the refuse policy to a result whose request is not
// known: the client gets a JSON-RPC error for its id instead.
func (rd reader) unattributed(m *mcpmsg.Message) []byte {
	x := rd.x
	x.obs.Immediate("unattributed")
	x.logger().Info().Bytes("id", m.ID).Msg("refused: result of a request this sidecar does not know (unattributed_responses: refuse)")
	return mcpmsg.ErrorResponse(m.ID, mcpmsg.CodeInternalError,
		"mcp-extproc: this result cannot be matched to its request, so its post hooks cannot run; not forwarded", nil)
}

// sseAnswer reads a streamed SSE answer event by event (STREAMED): complete
// events are re-emitted as they were, except the data of a result that
// changed; an incomplete event is held until its end arrives, and at the
// end of the stream a last unterminated event is inspected too. Every
// chunk is answered at once; a chunk whose bytes all go out unchanged is
// answered without a mutation.
type sseAnswer struct {
	reader
	dec *sse.Decoder
}

// newSSEDecoder is the decoder of a streamed answer, bounded by the
// inspection limit.
func newSSEDecoder(snap *Snapshot) *sse.Decoder {
	return sse.NewDecoder(int(snap.Settings.MaxBodyBytes))
}

// chunk handles one SSE chunk and returns the phase after it.
func (s *sseAnswer) chunk(chunk []byte, eos bool) (*extprocv3.ProcessingResponse, phase) {
	// prev stays valid through this Feed: the decoder only appends past
	// it or sets its buffer aside.
	prev := s.dec.Pending()
	heldBefore := len(prev)
	events, err := s.dec.Feed(chunk)
	if err != nil {
		return s.overflow(err, prev, chunk, events)
	}
	// The events are valid until the next Feed or Flush: use them first.
	out, built := s.events(events)
	if !built && (heldBefore > 0 || len(s.dec.Pending()) > 0) {
		// Earlier held bytes go out with this chunk, or part of it is held.
		out, built = appendRaw(nil, events), true
	}
	if eos {
		if ev, ok := s.dec.Flush(); ok {
			// The server ended the stream inside an event. Some clients
			// dispatch such an event, so it is inspected like any other.
			out, built = append(out, s.eventOrRaw(&ev)...), true
		}
	}
	if !built {
		return s.x.canned.responseBodyAsIs, s // byte for byte, no copy
	}
	return bodyReply(true, out, false), s
}

// events runs what the results await on complete events; built reports
// whether any event changed, and then out holds every event's bytes.
func (s *sseAnswer) events(events []sse.Event) (out []byte, built bool) {
	for i := range events {
		raw := s.event(&events[i])
		if raw == nil && !built {
			continue
		}
		if !built {
			built = true
			n := len(raw)
			for _, ev := range events {
				n += len(ev.Raw)
			}
			out = appendRaw(make([]byte, 0, n), events[:i])
		}
		if raw == nil {
			raw = events[i].Raw
		}
		out = append(out, raw...)
	}
	return out, built
}

// appendRaw appends the events' bytes as they came.
func appendRaw(out []byte, events []sse.Event) []byte {
	if out == nil {
		n := 0
		for _, ev := range events {
			n += len(ev.Raw)
		}
		out = make([]byte, 0, n)
	}
	for _, ev := range events {
		out = append(out, ev.Raw...)
	}
	return out
}

// eventOrRaw returns the event rewritten, or as it came.
func (s *sseAnswer) eventOrRaw(ev *sse.Event) []byte {
	if raw := s.event(ev); raw != nil {
		return raw
	}
	return ev.Raw
}

// event runs what the results await on the JSON-RPC messages of one
// event and returns the rewritten event, or nil when it passes unchanged.
func (s *sseAnswer) event(ev *sse.Event) []byte {
	x := s.x
	if !x.results.reading() || len(ev.Data) == 0 || !mcpmsg.MayBeResponse(ev.Data) {
		return nil
	}
	msgs, err := s.parse(ev.Data, false) // in the decoder's buffers
	if err != nil {
		return nil // not JSON-RPC (a ping, a comment-like payload): not ours to judge
	}
	x.obs.BodyInspected("response", len(ev.Data))
	replaced := s.answered(msgs)
	if replaced == nil {
		return nil
	}
	return ev.WithData(mcpmsg.Join(msgs, replaced))
}

// overflow handles an SSE event larger than the inspection limit: fail
// open passes the rest of the stream untouched; fail closed answers every
// awaited id with an error event and drops the rest, so the client sees a
// well-formed stream and never a truncated result.
func (s *sseAnswer) overflow(err error, prev, chunk []byte, complete []sse.Event) (*extprocv3.ProcessingResponse, phase) {
	x := s.x
	if !x.results.unreadFailsClosed() {
		// Everything not yet sent — the bytes held before this chunk, and
		// the chunk — goes out as it came.
		unsent := make([]byte, 0, len(prev)+len(chunk))
		unsent = append(append(unsent, prev...), chunk...)
		x.logger().Warn().Err(err).Msg("SSE event over the inspection limit passed uninspected (plugins fail open)")
		return bodyReply(true, unsent, false), passThrough{}
	}
	x.logger().Warn().Err(err).Msg("refused: SSE event over the inspection limit")
	x.obs.Immediate("too_large")
	// The events completed before the oversized one go out as usual (their
	// hooks run); the awaited ids left get an error event each.
	var out []byte
	for i := range complete {
		out = append(out, s.eventOrRaw(&complete[i])...)
	}
	for _, e := range x.results.failAwaited(fmt.Sprintf("result exceeds the inspection limit of %d bytes", x.snap.Settings.MaxBodyBytes)) {
		out = sse.AppendEvent(out, "message", e)
	}
	return bodyReply(true, out, false), droppedAnswer{}
}

// trailers answers the response trailers of a streamed answer, which asks
// for them (modeResponseStreamed) because with trailers no body chunk
// carries end_of_stream: the trailers are then the end of the body, and the
// only place left to settle bytes held back.
//
// A trailers reply carries no body, so held bytes can no longer go out. They
// are the start of an event the server never terminated, which a conforming
// SSE client discards at the end of the stream anyway. If a hooked call is
// still awaiting its result and its plugins fail closed, the result may be
// in those bytes: the stream is reset (an immediate response after the
// response headers went out, docs/extproc-contract.md §6) so the client sees
// a failure rather than waiting for an answer that will not come.
func (s *sseAnswer) trailers() (*extprocv3.ProcessingResponse, phase) {
	x := s.x
	held := len(s.dec.Pending())
	if held == 0 {
		return x.canned.responseTrailers, s
	}
	if res := &x.results; len(res.pending) > 0 && res.awaitedFailClosed() {
		x.logger().Warn().Int("held_bytes", held).Int("pending", len(res.pending)).
			Msg("refused: SSE stream ended with trailers inside an event while a hooked result was pending; stream reset")
		res.pending = nil
		return x.internalError("SSE stream ended inside an event"), droppedAnswer{}
	}
	x.logger().Warn().Int("held_bytes", held).Msg("SSE stream ended with trailers inside an event: the unterminated event is dropped, as a conforming client would drop it")
	return x.canned.responseTrailers, passThrough{}
}
