package processor

import (
	"bytes"
	"net/http"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcplist"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
	"github.com/mcp-extproc/mcp-extproc/pkg/toolpin"
)

// Results that reach the client on another stream than their request's
// (docs/mcp-result-paths.md): a GET that resumes a stream replays its
// responses, and a task's result is the answer to tasks/result or tasks/get.
// While any post hook is configured, the stream that forwards a request
// records what it was in the sidecar's attribution.Store, and the stream
// that sees a response it did not forward looks it up there.

// postConfigured reports whether any family's post hook has a plugin. When
// none has, nothing is recorded and GET streams are not read.
func (st *stream) postConfigured() bool {
	if st.post == 0 {
		st.post = 1
		for f := range hookfamily.Families() {
			if st.snap.Hooks.Applies(f.Post) {
				st.post = 2
				break
			}
		}
		for l := range mcplist.All() {
			if st.post == 1 && st.listHookApplies(l) {
				st.post = 2
			}
		}
	}
	return st.post == 2
}

// readsReplays reports whether requests are recorded and GET streams
// read: a post hook may apply to a replayed result, or rules filter a
// replayed list.
func (st *stream) readsReplays() bool {
	return st.postConfigured() || st.snap.Rules.Len() > 0 || st.snap.Pins != nil
}

// otherRequest answers the request headers of a request that carries no
// message for a pre hook. A GET to an MCP path opens a stream that may
// carry responses (a replay after Last-Event-ID): while post hooks are
// configured its response headers are asked for, to read an SSE body. A
// DELETE ends an MCP session: its entries are forgotten (a later replay is
// unattributable, the safe direction). Everything else passes untouched.
func (st *stream) otherRequest(h *extprocv3.HttpHeaders, method, path string, authority []byte) *extprocv3.ProcessingResponse {
	if (method != http.MethodGet && method != http.MethodDelete) || !st.snap.Settings.IsMCPPath(path) || !st.readsReplays() {
		return st.passThrough()
	}
	if method == http.MethodDelete {
		if st.sessionID != "" {
			st.attr.ForgetSession(st.ctx, st.sessionID)
			st.accepted.Forget(st.sessionID)
		}
		return st.passThrough()
	}
	st.path, st.authority = path, string(authority)
	// A replayed list is filtered for this GET's caller: the rules read
	// its headers (request.headers), as they read a POST's.
	st.headers = h.GetHeaders()
	st.foreign = true
	st.phase = phaseRequestSeen
	st.obs.ModeOverride("response_headers")
	return st.canned.readResponse
}

// remember notes every request of a forwarded body with its method and
// target, to be recorded once the server accepted them (commitRecords).
// Requests of every method are recorded, not only hooked ones: a replayed
// answer whose id the store does not know is refused, and a tools/list
// answer must still resume. Sessionless requests are not recorded (their
// ids share one key space and collide; their answers can only come on
// their own POST), nor a task request whose task is unknown.
func (st *stream) remember(msgs *mcpmsg.Body) {
	if !st.recordsRequests() {
		return
	}
	// A session a server accepted lately is recorded at once (no message
	// waits for it); any other waits for the answer (commitRecords).
	now := st.accepted.Has(st.sessionID)
	for i := range msgs.Messages {
		m := &msgs.Messages[i]
		if m.Kind != mcpmsg.KindRequest {
			continue
		}
		o := attribution.Origin{Method: m.Method}
		if route, ok := hookfamily.ByMethod(m.Method); ok {
			name, known := st.targetOf(route, m)
			if !known {
				continue
			}
			o.Name = name
		}
		if now {
			st.record(idKey(m.ID), o)
			continue
		}
		st.records = append(st.records, requestRecord{id: string(idKey(m.ID)), origin: o})
	}
}

// recordsRequests reports whether this request's ids are recorded for
// the results that may come on other streams.
func (st *stream) recordsRequests() bool {
	return st.sessionID != "" && st.readsReplays()
}

// awaitsAcceptance reports whether this request's ids can only be
// recorded once the server's answer shows it accepted the session: its
// answer's headers are then needed (needs). A session a server accepted
// lately is recorded at once (remember), costing no message.
func (st *stream) awaitsAcceptance() bool {
	return st.recordsRequests() && !st.accepted.Has(st.sessionID)
}

// requestRecord is a request of this stream to record: its canonical id
// and what it was.
type requestRecord struct {
	id     string
	origin attribution.Origin
}

// commitRecords is called at the response headers, before anything of the
// response reaches the client. Records still waiting are written when the
// server accepted the request (2xx; the session is then remembered as
// accepted) and dropped otherwise: a request the server refused (a session
// it does not know: 404, 400) is never recorded, so made-up sessions cost
// the store nothing (docs/attribution-store.md). Then, with a store that
// writes behind the requests (shared between replicas), it waits until
// this stream's records can be seen by the other replicas, so that a
// replay through another replica finds them. Only an SSE response can be
// replayed (a GET resumes from an event id); a task's record waits on its
// own (RecordTask). The store bounds the wait.
func (st *stream) commitRecords(status int, mediaType string) {
	accepted := status >= 200 && status <= 299
	if accepted && st.recordsRequests() {
		st.accepted.Add(st.sessionID) // a notification's 202 says so too
	}
	if len(st.records) > 0 {
		if !accepted {
			st.logger().Debug().Int("status", status).Int("requests", len(st.records)).Msg("requests not recorded for attribution: the server did not accept them")
			st.records = nil
			return
		}
		st.writeRecords()
	}
	if !st.recorded {
		return
	}
	st.recorded = false
	if s, ok := st.attr.(attribution.Syncer); ok && mediaType == "text/event-stream" {
		s.Sync(st.ctx)
	}
}

// writeRecords writes the records that waited for the answer.
func (st *stream) writeRecords() {
	for _, r := range st.records {
		st.record([]byte(r.id), r.origin)
	}
	st.records = nil
}

// record writes one request's record to the store.
func (st *stream) record(id []byte, o attribution.Origin) {
	if err := st.attr.Record(st.ctx, st.sessionID, id, o); err != nil {
		st.logger().Debug().Err(err).Str("method", o.Method).Msg("request not recorded for attribution")
		return
	}
	st.recorded = true
}

// targetOf returns the target name of a routed request: from its params,
// or, for a route whose target is not in the request (tasks/result,
// tasks/get), the tool of the tools/call that created the task. known is
// false when that task was never seen (or is forgotten).
func (st *stream) targetOf(r *hookfamily.Route, m *mcpmsg.Message) (name string, known bool) {
	if r.TargetParam != "" {
		return targetName(r, m), true
	}
	id, ok := attribution.ParamsTaskID(m.Params)
	if !ok {
		return "", false
	}
	o, err := st.attr.LookupTask(st.ctx, st.sessionID, id)
	if err != nil || o.Method != "tools/call" {
		return "", false
	}
	return o.Name, true
}

// mayCreateTask reports whether a tools/call may be answered with a task:
// params.task (2025-11-25) or the tasks extension declared in params._meta
// (2026-07-28) both name "task".
func mayCreateTask(m *mcpmsg.Message) bool {
	return m.Method == "tools/call" && (bytes.Contains(m.Params, []byte("task")) || bytes.Contains(m.Params, []byte(`\u`)))
}

// recordTask remembers the task a tools/call answer created, so that its
// result (tasks/result, tasks/get) gets tool_post_invoke under tool.
func (st *stream) recordTask(result []byte, tool string) {
	if !bytes.Contains(result, []byte(`"task`)) && !bytes.Contains(result, []byte(`\u`)) {
		return
	}
	id, ok := attribution.CreatedTaskID(result)
	if !ok {
		return
	}
	if err := st.attr.RecordTask(st.ctx, st.sessionID, id, attribution.Origin{Method: "tools/call", Name: tool}); err != nil {
		st.logger().Warn().Err(err).Msg("task not recorded: its result will be unattributable")
	}
}

// attribute finds what a response to a request of another stream answers.
// It returns nil when the response passes (no post hook applies to its
// request, or the policy lets unattributable responses pass).
func (st *stream) attribute(id []byte) *pendingCall {
	o, err := st.attr.Lookup(st.ctx, st.sessionID, id)
	if err != nil {
		if !st.snap.Settings.RefusesUnattributed() {
			return nil
		}
		return &pendingCall{unknown: true}
	}
	if l, ok := mcplist.ByMethod(o.Method); ok {
		if !st.readsList(o.Method) {
			return nil
		}
		return &pendingCall{list: l} // the rules filter (and pinning checks) a replayed list
	}
	route, ok := hookfamily.ByMethod(o.Method)
	if !ok || !route.Post {
		return nil
	}
	st.ensureContext()
	target := hookfamily.Target{Family: route.Family, Name: o.Name}
	hook := st.snap.Hooks.AppliesTo(route.Family.Post, &st.global, target)
	if !hook && o.Method != "tools/call" {
		return nil
	}
	return &pendingCall{route: route, target: target, hook: hook, rc: executor.NewRequestContext(st.global)}
}

// unattributed applies the refuse policy to a result whose request is not
// known: the client gets a JSON-RPC error for its id instead.
func (st *stream) unattributed(m *mcpmsg.Message) []byte {
	st.obs.Immediate("unattributed")
	st.logger().Info().Bytes("id", m.ID).Msg("refused: result of a request this sidecar does not know (unattributed_responses: refuse)")
	return mcpmsg.ErrorResponse(m.ID, mcpmsg.CodeInternalError,
		"mcp-extproc: this result cannot be matched to its request, so its post hooks cannot run; not forwarded", nil)
}

// overflowFailsClosed reports whether a response event too large to
// inspect is refused: a pending request's post hook fails closed, or, on a
// stream that may carry other streams' results, any post hook does.
func (st *stream) overflowFailsClosed() bool {
	if st.pendingFailClosed() {
		return true
	}
	if !st.foreign {
		return false
	}
	if st.snap.Rules.Len() > 0 || (st.snap.Pins != nil && st.snap.Pins.OnChange() != toolpin.Alert) {
		return true // a list the rules filter, or pinning hides or blocks, may be in it
	}
	for f := range hookfamily.Families() {
		if st.snap.Hooks.Applies(f.Post) && st.snap.Hooks.FailClosed(f.Post) {
			return true
		}
	}
	return false
}
