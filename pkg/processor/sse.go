package processor

import (
	"fmt"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
	"github.com/mcp-extproc/mcp-extproc/pkg/sse"
)

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
	msgs, err := mcpmsg.Parse(ev.Data)
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
