package processor

import (
	"fmt"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
	"github.com/mcp-extproc/mcp-extproc/pkg/sse"
)

// streamedResponse handles one SSE chunk: complete events are re-emitted as
// they were, except the data of a hooked result; an incomplete event is held
// until its end arrives, and at the end of the stream a last unterminated
// event is inspected too. Every chunk is answered at once; a chunk whose bytes
// all go out unchanged is answered without a mutation.
func (st *stream) streamedResponse(chunk []byte, eos bool) *extprocv3.ProcessingResponse {
	// prev stays valid through this Feed: the decoder only appends past
	// it or sets its buffer aside.
	prev := st.sse.Pending()
	heldBefore := len(prev)
	events, err := st.sse.Feed(chunk)
	if err != nil {
		return st.sseOverflow(err, prev, chunk, events)
	}
	// The events are valid until the next Feed or Flush: use them first.
	out, built := st.sseEvents(events)
	if !built && (heldBefore > 0 || len(st.sse.Pending()) > 0) {
		// Earlier held bytes go out with this chunk, or part of it is held.
		out, built = appendRaw(nil, events), true
	}
	if eos {
		if ev, ok := st.sse.Flush(); ok {
			// The server ended the stream inside an event. Some clients
			// dispatch such an event, so it is inspected like any other.
			out, built = append(out, st.sseEventOrRaw(&ev)...), true
		}
	}
	if !built {
		return st.canned.responseBodyAsIs // byte for byte, no copy
	}
	return bodyReply(true, out, false)
}

// sseEvents runs the post hooks on complete events; built reports whether
// any event changed, and then out holds every event's bytes.
func (st *stream) sseEvents(events []sse.Event) (out []byte, built bool) {
	for i := range events {
		raw := st.sseEvent(&events[i])
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

// sseEventOrRaw returns the event rewritten by the post hooks, or as it came.
func (st *stream) sseEventOrRaw(ev *sse.Event) []byte {
	if raw := st.sseEvent(ev); raw != nil {
		return raw
	}
	return ev.Raw
}

// sseEvent runs post hooks on the JSON-RPC messages of one event and returns
// the rewritten event, or nil when it passes unchanged.
func (st *stream) sseEvent(ev *sse.Event) []byte {
	if (len(st.pending) == 0 && !st.foreign) || len(ev.Data) == 0 || !mcpmsg.MayBeResponse(ev.Data) {
		return nil
	}
	msgs, err := mcpmsg.Parse(ev.Data)
	if err != nil {
		return nil // not JSON-RPC (a ping, a comment-like payload): not ours to judge
	}
	st.obs.BodyInspected("response", len(ev.Data))
	replaced := st.postHooks(msgs)
	if replaced == nil {
		return nil
	}
	return ev.WithData(mcpmsg.Join(msgs, replaced))
}

// sseOverflow handles an SSE event larger than the inspection limit: fail
// open passes the rest of the stream untouched; fail closed answers every
// pending id with an error event and drops the rest, so the client sees a
// well-formed stream and never a truncated result.
func (st *stream) sseOverflow(err error, prev, chunk []byte, complete []sse.Event) *extprocv3.ProcessingResponse {
	if !st.overflowFailsClosed() {
		// Everything not yet sent — the bytes held before this chunk, and
		// the chunk — goes out as it came.
		unsent := make([]byte, 0, len(prev)+len(chunk))
		unsent = append(append(unsent, prev...), chunk...)
		st.logger().Warn().Err(err).Msg("SSE event over the inspection limit passed uninspected (plugins fail open)")
		st.phase = phaseResponseNone
		return bodyReply(true, unsent, false)
	}
	st.logger().Warn().Err(err).Msg("refused: SSE event over the inspection limit")
	st.obs.Immediate("too_large")
	st.phase = phaseResponseDropped
	// The events completed before the oversized one go out as usual (their
	// hooks run); the pending ids left get an error event each.
	var out []byte
	for i := range complete {
		out = append(out, st.sseEventOrRaw(&complete[i])...)
	}
	for _, e := range st.failPending(fmt.Sprintf("result exceeds the inspection limit of %d bytes", st.snap.Settings.MaxBodyBytes)) {
		out = sse.AppendEvent(out, "message", e)
	}
	return bodyReply(true, out, false)
}
